package sign

import (
	"fmt"
	"os"
	"path/filepath"
)

// RepoPath returns the path under which file is signed: relative to the
// root of the Git checkout containing it (the nearest directory with a
// .git entry), slash separated. Outside a Git checkout a relative file
// path is used as given; an absolute one is an error, since it would not
// name the same file on another machine.
func RepoPath(file string) (string, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			rel, err := filepath.Rel(dir, abs)
			if err != nil {
				return "", fmt.Errorf("%s: %w", file, err)
			}
			return CleanPath(filepath.ToSlash(rel))
		}
		if parent := filepath.Dir(dir); parent == dir {
			break
		}
	}
	if filepath.IsAbs(file) {
		return "", fmt.Errorf("%s is not in a Git checkout: give its path in the repository", file)
	}
	return CleanPath(filepath.ToSlash(file))
}
