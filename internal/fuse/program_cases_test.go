package fuse

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Real programs on the mount, beyond coreutils: tar of a source tree and
// git.

func programCases() []posixCase {
	return []posixCase{
		{"tar_source_tree", testTarSourceTree},
		{"git", testGit},
	}
}

// listing is a tar archive's verbose listing (modes, owners, sizes, times
// and names) in archive order.
func listing(t *testing.T, tarball string) string {
	t.Helper()
	return run(t, "", "tar", "--numeric-owner", "-tvf", tarball)
}

// checksums is sha256sum of every regular file below root, by relative
// path, sorted.
func checksums(t *testing.T, root string) string {
	t.Helper()
	return run(t, root, "/bin/sh", "-c", "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum")
}

// testTarSourceTree extracts an archive of this repository's internal/
// tree (about 500 files) on the mount, archives it again from the mount,
// and compares the two listings and the files' checksums.
func testTarSourceTree(t *testing.T, f *fixture, dir string) {
	src, err := filepath.Abs("..") // internal/
	must(t, err)
	orig := filepath.Join(t.TempDir(), "orig.tar")
	run(t, filepath.Dir(src), "tar", "--sort=name", "-cf", orig, filepath.Base(src))
	run(t, dir, "tar", "-xpf", orig)
	again := filepath.Join(t.TempDir(), "again.tar")
	run(t, dir, "tar", "--sort=name", "-cf", again, filepath.Base(src))
	if a, b := listing(t, orig), listing(t, again); a != b {
		t.Errorf("listings differ:\n--- original\n%s\n--- from the mount\n%s", a, b)
	} else if n := strings.Count(a, "\n"); n < 400 {
		t.Errorf("only %d entries archived", n)
	}
	if a, b := checksums(t, src), checksums(t, filepath.Join(dir, filepath.Base(src))); a != b {
		t.Errorf("checksums differ between the tree and its copy on the mount")
	}
}

// testGit makes a repository on the mount with a few hundred files in
// several commits (adds, changes, renames, deletes), packs it, checks it
// with git fsck, and clones it to local disk.
func testGit(t *testing.T, f *fixture, dir string) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipped: no git (apt-get install -y git)")
	}
	repo := filepath.Join(dir, "repo")
	must(t, os.Mkdir(repo, 0o755))
	git := func(args ...string) string {
		t.Helper()
		return run(t, repo, "git", append([]string{"-c", "user.name=Canopy", "-c", "user.email=canopy@example.com",
			"-c", "init.defaultBranch=main", "-c", "gc.auto=0"}, args...)...)
	}
	git("init", "-q")
	for i := range 300 {
		d := filepath.Join(repo, "src", fmt.Sprintf("pkg%d", i%12))
		must(t, os.MkdirAll(d, 0o755))
		must(t, os.WriteFile(filepath.Join(d, fmt.Sprintf("file%d.txt", i)), randomBytes(200+i*37, uint64(i)), 0o644))
	}
	git("add", "-A")
	git("commit", "-q", "-m", "300 files")
	for i := range 300 {
		if i%5 == 0 {
			p := filepath.Join(repo, "src", fmt.Sprintf("pkg%d", i%12), fmt.Sprintf("file%d.txt", i))
			must(t, os.WriteFile(p, randomBytes(1000+i, uint64(1000+i)), 0o644))
		}
	}
	git("mv", "src/pkg0", "src/renamed")
	git("rm", "-q", "-r", "-f", "src/pkg1")
	git("commit", "-q", "-a", "-m", "change, rename, delete")
	if out := git("status", "--porcelain"); out != "" {
		t.Errorf("git status after the commits: %q", out)
	}
	if out := git("fsck", "--full", "--strict"); strings.TrimSpace(out) != "" {
		t.Errorf("git fsck printed %q", out)
	}
	git("gc", "-q")
	if out := git("fsck", "--full", "--strict"); strings.TrimSpace(out) != "" {
		t.Errorf("git fsck after gc printed %q", out)
	}
	if n := strings.Count(git("log", "--oneline"), "\n"); n != 2 {
		t.Errorf("%d commits, want 2", n)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	run(t, "", "git", "clone", "-q", repo, clone)
	if out := run(t, clone, "git", "ls-files"); strings.Count(out, "\n") != 275 {
		t.Errorf("clone has %d files, want 275", strings.Count(out, "\n"))
	}
	run(t, "", "diff", "-r", "--exclude=.git", repo, clone)
}
