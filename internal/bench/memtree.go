package bench

import (
	"fmt"
	"strconv"
)

// TreeTop is the name of the directory that holds a memory benchmark's
// tree, as mdtest names the top of its tree.
const TreeTop = "mdtest_tree.0"

// Tree is the mdtest-style namespace the memory benchmarks build, in
// process and over RPC alike: under TreeTop, Dirs directories
// mdtest_tree.1 ... mdtest_tree.<Dirs>, with Files regular files spread
// evenly over them (the first Files mod Dirs directories take one more),
// named file.mdtest.0.<i> with i counting from 0 within each directory.
type Tree struct {
	Files int
	Dirs  int
}

// NewTree lays out files files over dirs directories; dirs 0 means one
// directory per 1,000 files, at least one.
func NewTree(files, dirs int) (Tree, error) {
	if dirs == 0 {
		dirs = max(1, files/1000)
	}
	switch {
	case files < 1:
		return Tree{}, fmt.Errorf("files %d: need at least 1", files)
	case dirs < 1 || dirs > files:
		return Tree{}, fmt.Errorf("dirs %d: need between 1 and the number of files (%d)", dirs, files)
	}
	return Tree{Files: files, Dirs: dirs}, nil
}

// DirName is the name of directory k (0 <= k < Dirs) inside TreeTop.
func (t Tree) DirName(k int) string { return "mdtest_tree." + strconv.Itoa(k+1) }

// FilesIn is how many files directory k holds.
func (t Tree) FilesIn(k int) int {
	n := t.Files / t.Dirs
	if k < t.Files%t.Dirs {
		n++
	}
	return n
}

// FileName is the name of file i of a directory.
func FileName(i int) string { return "file.mdtest.0." + strconv.Itoa(i) }
