package peers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// AuditRecords reads an audit log's records as JSON objects (type,
// decision, step, tool, reason, …); a line that is not one fails the test.
func AuditRecords(t testing.TB, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}
