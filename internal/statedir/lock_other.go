//go:build !unix

package statedir

// lockRoot: without flock, preparing is not serialized between processes;
// a state directory's own lock still keeps two proxies off one directory.
func lockRoot(string) (func(), error) { return func() {}, nil }
