package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The session test runs `canopy up` as a real child process (this test
// binary re-executed with upChildEnv set), drives it with the file
// commands, kills it with SIGKILL, restarts it on the same directory and
// checks that every acknowledged change is there.

const (
	upChildEnv  = "CANOPY_TEST_UP_DIR"
	mainArgsEnv = "CANOPY_TEST_MAIN_ARGS" // run Main with these unit-separator (0x1f) separated arguments
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(upChildEnv); dir != "" {
		os.Exit(Main([]string{"up", "--dir", dir, "--listen", "127.0.0.1:0"}))
	}
	if args := os.Getenv(mainArgsEnv); args != "" {
		os.Exit(Main(strings.Split(args, "\x1f")))
	}
	os.Exit(m.Run())
}

type upProcess struct {
	cmd  *exec.Cmd
	addr string
}

// startUp runs `canopy up` on dir and waits for its ready line.
func startUp(t *testing.T, dir string) *upProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), upChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "canopy: ready at ")
	if err != nil || !ok {
		t.Fatalf("ready line %q (%v), want \"canopy: ready at ADDR\"", line, err)
	}
	t.Logf("canopy up ready at %s after %v", addr, time.Since(start).Round(time.Millisecond))
	return &upProcess{cmd: cmd, addr: addr}
}

// canopy runs one command in-process against addr and returns its output.
func canopy(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRoot(&out, &out)
	root.SetArgs(append([]string{"--addr", addr}, args...))
	err := root.Execute()
	return out.String(), err
}

func mustCanopy(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, err := canopy(t, addr, args...)
	if err != nil {
		t.Fatalf("canopy %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func TestSessionSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir)
	a := up.addr

	mustCanopy(t, a, "mkdir", "-p", "/proj/src/lib/deep")
	for i := 0; i < 1000; i += 100 {
		args := []string{"touch"}
		for j := i; j < i+100; j++ {
			args = append(args, fmt.Sprintf("/proj/src/f%04d", j))
		}
		mustCanopy(t, a, args...)
	}
	mustCanopy(t, a, "touch", "/proj/src/lib/deep/x")
	mustCanopy(t, a, "mv", "/proj/src/f0000", "/proj/moved")
	mustCanopy(t, a, "rm", "-r", "/proj/src/lib")
	mustCanopy(t, a, "ln", "-s", "/proj/src", "/proj/link")
	mustCanopy(t, a, "chmod", "700", "/proj/moved")
	mustCanopy(t, a, "xattr", "set", "/proj/moved", "user.tag", "blue")

	check := func() (string, string) {
		ls := mustCanopy(t, a, "ls", "-l", "/proj")
		lines := strings.Split(strings.TrimSpace(ls), "\n")
		if len(lines) != 3 {
			t.Fatalf("ls -l /proj:\n%s\nwant 3 entries", ls)
		}
		want := []struct{ perm, nlink, name string }{
			{"lrwxrwxrwx", "1", "link -> /proj/src"},
			{"-rwx------", "1", "moved"},
			{"drwxr-xr-x", "2", "src"},
		}
		for i, line := range lines {
			f := strings.Fields(line)
			name := strings.Join(f[7:], " ")
			if f[0] != want[i].perm || f[1] != want[i].nlink || f[2] != "0" || f[3] != "0" || name != want[i].name {
				t.Errorf("ls -l line %q, want %s %s 0 0 ... %s", line, want[i].perm, want[i].nlink, want[i].name)
			}
		}
		if n := len(strings.Fields(mustCanopy(t, a, "ls", "/proj/src"))); n != 999 {
			t.Errorf("/proj/src holds %d entries, want 999", n)
		}
		st := mustCanopy(t, a, "stat", "--json", "/proj/moved")
		var s statJSON
		if err := json.Unmarshal([]byte(st), &s); err != nil {
			t.Fatalf("stat --json: %v in %q", err, st)
		}
		if s.Type != "file" || s.Mode != "0700" || s.Perm != "-rwx------" || s.Nlink != 1 || s.Path != "/proj/moved" {
			t.Errorf("stat --json /proj/moved = %+v", s)
		}
		if got := mustCanopy(t, a, "xattr", "get", "/proj/moved", "user.tag"); got != "blue\n" {
			t.Errorf("xattr get = %q, want blue", got)
		}
		if _, err := canopy(t, a, "stat", "/proj/src/lib"); err == nil || err.Error() != "stat /proj/src/lib: no such file or directory" {
			t.Errorf("stat of removed dir: %v", err)
		}
		if got := mustCanopy(t, a, "count", "/proj"); !strings.Contains(strings.Join(strings.Fields(got), " "), "2 1001 0 /proj") {
			t.Errorf("count /proj = %q, want 2 dirs, 1001 files", got)
		}
		return ls, st
	}
	lsBefore, statBefore := check()

	up.cmd.Process.Signal(syscall.SIGKILL)
	up.cmd.Wait()
	up = startUp(t, dir)
	a = up.addr
	lsAfter, statAfter := check()
	if lsAfter != lsBefore || statAfter != statBefore {
		t.Errorf("after kill -9 and restart:\n%s%s\nbefore:\n%s%s", lsAfter, statAfter, lsBefore, statBefore)
	}
}

// TestErrorLine runs the command line as a process: a failure prints one
// line on stderr and exits with status 1.
func TestErrorLine(t *testing.T) {
	up := startUp(t, t.TempDir())
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join([]string{"stat", "--addr", up.addr, "/x"}, "\x1f"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1", err)
	}
	if got := stderr.String(); got != "canopy: stat /x: no such file or directory\n" {
		t.Errorf("stderr %q", got)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
}
