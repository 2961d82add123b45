package manifest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Stdin is the path that ReadPaths reads from its stdin argument.
const Stdin = "-"

// ReadPaths reads every path in order: "-" reads stdin (source "stdin"), a
// file is read whatever its extension, and a directory is walked
// recursively, reading files ending in .yaml, .yml or .json in lexical
// order and skipping files and directories whose names start with ".".
// Like Read it returns every object it could read and an error joining one
// error per bad document; a path that cannot be opened is an error too.
func ReadPaths(paths []string, stdin io.Reader) ([]Object, error) {
	var objs []Object
	var errs []error
	for _, p := range paths {
		got, err := readPath(p, stdin)
		objs = append(objs, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return objs, errors.Join(errs...)
}

func readPath(p string, stdin io.Reader) ([]Object, error) {
	if p == Stdin {
		if stdin == nil {
			return nil, errors.New("read stdin: no input")
		}
		return Read(stdin, "stdin")
	}
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("manifest path: %w", err)
	}
	if !info.IsDir() {
		return readFile(p)
	}
	files, err := manifestFiles(p)
	if err != nil {
		return nil, err
	}
	var objs []Object
	var errs []error
	for _, f := range files {
		got, err := readFile(f)
		objs = append(objs, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return objs, errors.Join(errs...)
}

func readFile(p string) ([]Object, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("manifest file: %w", err)
	}
	return parse(data, p)
}

// manifestFiles lists the manifest files under dir, sorted.
func manifestFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		hidden := p != dir && strings.HasPrefix(d.Name(), ".")
		if d.IsDir() {
			if hidden {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if !hidden {
				files = append(files, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list manifests in %s: %w", dir, err)
	}
	sort.Strings(files)
	return files, nil
}
