package vfs

import "os"

// Default is the operating system's file system.
var Default FS = diskFS{}

// diskFS implements FS with package os.
type diskFS struct{}

// diskFile is an *os.File with Datasync.
type diskFile struct{ *os.File }

func (f diskFile) Datasync() error {
	if err := datasync(f.File); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}

// openFile opens name with os.OpenFile and wraps it as a File.
func openFile(name string, flag int) (File, error) {
	f, err := os.OpenFile(name, flag, 0o644)
	if err != nil {
		return nil, err
	}
	return diskFile{f}, nil
}

func (diskFS) Create(name string) (File, error) {
	return openFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
}

func (diskFS) OpenWrite(name string) (File, error) { return openFile(name, os.O_WRONLY) }

func (diskFS) Open(name string) (File, error) { return openFile(name, os.O_RDONLY) }

func (diskFS) Remove(name string) error { return os.Remove(name) }

func (diskFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (diskFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

func (diskFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (diskFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

func (diskFS) Size(name string) (int64, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (diskFS) Truncate(name string, size int64) error { return os.Truncate(name, size) }
