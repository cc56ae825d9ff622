package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
)

// The tree case: many small files in a few nested directories, where a client's cost is
// round trips per file (open, read or write, close) rather than bytes, so what counts
// is how many files it keeps in flight.

// treeSource is a tree of random files the tree case copies, one per file count.
type treeSource struct {
	root     string
	files    []string // slash-separated paths relative to root, in layout order
	dirs     int
	fileSize int64
}

func (t *treeSource) size() int64 { return int64(len(t.files)) * t.fileSize }

// describe is the tree for a table heading.
func (t *treeSource) describe() string {
	return fmt.Sprintf("tree of %d × %s files in %d dirs (%s)", len(t.files), formatSize(t.fileSize), t.dirs, formatSize(t.size()))
}

// treeLayout places files round robin in dirs directories named d00, d01, …, each odd
// one nested in the even one before it (d00, d00/d01, d02, d02/d03, …), so that both the
// root and a subdirectory hold directories as well as files. It returns the directories,
// parents first, and the files.
func treeLayout(files, dirs int) (dirPaths, filePaths []string) {
	for i := range dirs {
		name := fmt.Sprintf("d%02d", i)
		if i%2 == 1 {
			name = dirPaths[i-1] + "/" + name
		}
		dirPaths = append(dirPaths, name)
	}
	for i := range files {
		filePaths = append(filePaths, fmt.Sprintf("%s/f%05d.bin", dirPaths[i%dirs], i))
	}
	return dirPaths, filePaths
}

// tree returns the source tree for shape, creating it on first use. Contents are random
// and differ from file to file, so a file copied to the wrong name is caught.
func (e *env) tree(shape treeShape) (*treeSource, error) {
	key := fmt.Sprintf("tree-%d-%d-%d", shape.files, shape.dirs, shape.fileSize)
	if t, ok := e.trees[key]; ok {
		return t, nil
	}
	t := &treeSource{root: filepath.Join(e.work, key), dirs: shape.dirs, fileSize: shape.fileSize}
	dirs, files := treeLayout(shape.files, shape.dirs)
	for _, d := range append([]string{""}, dirs...) {
		if err := os.Mkdir(filepath.Join(t.root, filepath.FromSlash(d)), 0o755); err != nil {
			return nil, err
		}
	}
	rng := rand.NewChaCha8([32]byte{'t', 'r', 'e', 'e'})
	buf := make([]byte, shape.fileSize)
	for _, f := range files {
		_, _ = rng.Read(buf)
		if err := os.WriteFile(filepath.Join(t.root, filepath.FromSlash(f)), buf, 0o644); err != nil {
			return nil, err
		}
	}
	t.files = files
	e.trees[key] = t
	return t, nil
}

// verifyTree checks that dst holds exactly src's files, each with src's content, and no
// others: a leftover part file or a file landing one directory off fails it.
func verifyTree(src *treeSource, dst string) error {
	want := map[string]bool{}
	for _, f := range src.files {
		want[f] = true
	}
	var got int
	err := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dst, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() || !want[rel] {
			return fmt.Errorf("copied tree has an unexpected entry %s (%v)", rel, d.Type())
		}
		a, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(src.root, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		if !bytes.Equal(a, b) {
			return fmt.Errorf("copied %s differs from its source (%d bytes, source %d)", rel, len(a), len(b))
		}
		got++
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) && got == 0 {
		return fmt.Errorf("the copy %s does not exist", dst)
	}
	if err != nil {
		return err
	}
	if got != len(src.files) {
		var missing []string
		for f := range want {
			if _, err := os.Lstat(filepath.Join(dst, filepath.FromSlash(f))); err != nil {
				missing = append(missing, f)
			}
		}
		slices.Sort(missing)
		return fmt.Errorf("copied tree has %d of %d files; missing e.g. %v", got, len(src.files), missing[:min(3, len(missing))])
	}
	return nil
}
