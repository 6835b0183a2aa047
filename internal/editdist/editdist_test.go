package editdist

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"proxy", "proxy", 0},
		{"porxy", "proxy", 2},
		{"prxy", "proxy", 1},
		{"", "sign", 4},
		{"kitten", "sitting", 3},
		{"gét_order", "get_order", 1}, // one character, two bytes
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}
