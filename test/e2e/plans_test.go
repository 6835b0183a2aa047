//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/planlock/planlock/internal/testkit/testplans"
)

// The plans of the tests: the same as package proxy's own (internal/testkit/testplans).

const goodHash = testplans.GoodHash

const refundPlan = testplans.Refund

const testPlan = testplans.Faults

func anyOrder(src string) string { return testplans.AnyOrder(src) }

// upstreamCalls counts the tools/call the upstream received, per tool.
func upstreamCalls(t *testing.T, callsLog string) map[string]int {
	t.Helper()
	f, err := os.Open(callsLog)
	if os.IsNotExist(err) {
		return map[string]int{}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Tool string `json:"tool"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("calls log: %v", err)
		}
		n[r.Tool]++
	}
	return n
}
