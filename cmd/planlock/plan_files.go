package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// planFiles expands the PATH arguments of plan fmt and plan validate the
// same way, as terraform does: a file is itself; a directory means its .hcl
// files, and with recursive those of its subdirectories too (hidden ones
// and node_modules skipped). Files come in lexical order per directory.
// skipped counts the .hcl files in subdirectories left out because
// recursive is off, so the caller can say so.
func planFiles(path string, recursive bool) (files []string, skipped int, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	if !st.IsDir() {
		return []string{path}, 0, nil
	}
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != path && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Ext(p) != ".hcl" || !d.Type().IsRegular() {
			return nil
		}
		if !recursive && filepath.Dir(p) != filepath.Clean(path) {
			skipped++
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	return files, skipped, nil
}

// noPlanFiles says that a directory holds no plan, and where they are when
// they are only in subdirectories.
func noPlanFiles(dir string, skipped int) string {
	if skipped > 0 {
		return fmt.Sprintf("no .hcl files in %s; its subdirectories have %s (give --recursive)", dir, plural(skipped, "file", "files"))
	}
	return fmt.Sprintf("no .hcl files in %s", dir)
}
