package oneline

import "testing"

func TestOf(t *testing.T) {
	for _, tt := range []struct {
		in   string
		max  int
		want string
	}{
		{"", 0, ""},
		{"  a\n\tb \r\n c  ", 0, "a b c"},
		{"line one\nforged: line two", 0, "line one forged: line two"},
		{"ééééé", 3, "ééé…"},
		{"abc", 3, "abc"},
		{"a  b", 2, "a …"},
	} {
		if got := Of(tt.in, tt.max); got != tt.want {
			t.Errorf("Of(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}
