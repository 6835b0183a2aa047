package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The relay table of a recorded run (floor, npm relays, CPU per call,
// memory), against its golden file; a run without the floor has none.
func TestWriteRelayGolden(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "relay-raw.txt"))
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := parse(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !hasRelay(res) {
		t.Fatal("hasRelay = false for a run with the floor")
	}
	var out bytes.Buffer
	writeRelay(&out, res)
	golden := filepath.Join("testdata", "relay.md")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("relay table differs from %s (go test -update to accept):\n%s", golden, out.Bytes())
	}
	old, err := os.ReadFile(filepath.Join("testdata", "raw.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if res, _, err := parse(bytes.NewReader(old)); err != nil || hasRelay(res) {
		t.Errorf("an older run: hasRelay true or %v", err)
	}
}
