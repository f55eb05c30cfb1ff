package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
)

// A mount with a metrics endpoint publishes where it is, so that
// `canopy stats --mount PATH` finds it from the mount point alone: a
// small JSON file, $CANOPY_RUN_DIR/mounts/<mount point, path-escaped>.json
// (CANOPY_RUN_DIR defaults to /run/canopy), written when the endpoint is
// up and removed when the mount process ends.

const (
	runDirEnv     = "CANOPY_RUN_DIR"
	defaultRunDir = "/run/canopy"
)

// mountRecord is what a mount publishes of itself.
type mountRecord struct {
	Mountpoint string `json:"mountpoint"`
	Metrics    string `json:"metrics"` // HOST:PORT of its --metrics-listen
	Addr       string `json:"addr"`    // the server or router it mounts
	PID        int    `json:"pid"`
}

// ErrNoMountRecord reports a path no running mount has published itself
// at.
var ErrNoMountRecord = errors.New("no mount with a metrics endpoint is published there")

func mountRecordPath(mountpoint string) string {
	dir := os.Getenv(runDirEnv)
	if dir == "" {
		dir = defaultRunDir
	}
	return filepath.Join(dir, "mounts", url.PathEscape(filepath.Clean(mountpoint))+".json")
}

// publishMount writes the record of the mount at mountpoint, whose
// metrics are served at metrics; the returned function removes it.
func publishMount(mountpoint, metrics, addr string) (func(), error) {
	p := mountRecordPath(mountpoint)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("publish mount: %w", err)
	}
	data, _ := json.Marshal(mountRecord{Mountpoint: mountpoint, Metrics: metrics, Addr: addr, PID: os.Getpid()})
	tmp := fmt.Sprintf("%s.%d.tmp", p, os.Getpid())
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("publish mount: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("publish mount: %w", err)
	}
	return func() { os.Remove(p) }, nil
}

// findMount returns the record of the running mount at path.
func findMount(path string) (mountRecord, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return mountRecord{}, err
	}
	var r mountRecord
	data, err := os.ReadFile(mountRecordPath(abs))
	if errors.Is(err, os.ErrNotExist) {
		return r, fmt.Errorf("%s: %w (mount it with --metrics-listen or -o metrics=ADDR)", abs, ErrNoMountRecord)
	}
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil || r.Metrics == "" {
		return r, fmt.Errorf("%s: a bad record in %s (%v)", abs, mountRecordPath(abs), err)
	}
	// A mount killed outright leaves its record behind.
	if err := syscall.Kill(r.PID, 0); errors.Is(err, syscall.ESRCH) {
		return r, fmt.Errorf("%s: %w (the record of process %d, which has ended)", abs, ErrNoMountRecord, r.PID)
	}
	return r, nil
}
