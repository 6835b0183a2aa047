package sign

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/planlock/planlock/internal/atomicfile"
)

// WriteBundle writes data to path through a temporary file in the same
// directory, renamed over path. The rename replaces a symlink at path
// itself, never the file it points to, so a planted link cannot make
// signing overwrite another file; readers never see a half-written bundle.
func WriteBundle(path string, data []byte) error {
	if filepath.Base(path) == "" || strings.HasSuffix(path, string(filepath.Separator)) {
		return fmt.Errorf("write bundle %s: not a file name", path)
	}
	// Bundles are public, as they always were (0644).
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("write bundle %s: %w", path, err)
	}
	return nil
}
