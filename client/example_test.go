package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"os"
	"syscall"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/vfs"
)

// exampleServer starts a metadata server on a loopback port for an
// example, its log in memory and its file data in a temporary directory,
// and returns its address and a function that stops it and removes the
// directory. In real use the server is `canopy serve` elsewhere and only
// the address is needed.
func exampleServer() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "canopy-example-")
	if err != nil {
		log.Fatal(err)
	}
	s, err := server.Open(server.Config{
		Dir: "/meta", FS: vfs.NewMem(), Storage: "file://" + dir,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(ln)
	}()
	return ln.Addr().String(), func() {
		s.Close()
		<-done
		os.RemoveAll(dir)
	}
}

func ExampleDial() {
	addr, stop := exampleServer()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	fi, err := c.Mkdir(ctx, "/projects", 0o755)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fi.Name(), fi.IsDir(), fi.Mode().Perm())
	// Output: projects true -rwxr-xr-x
}

func ExampleClient_WriteFile() {
	addr, stop := exampleServer()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// WriteFile and ReadFile take and give the whole contents; once
	// WriteFile returns, every client reads them.
	if err := c.WriteFile(ctx, "/greeting.txt", []byte("hello, canopy\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	b, err := c.ReadFile(ctx, "/greeting.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(b))

	// A File is like an *os.File: here it appends, and Close commits.
	f, err := c.OpenFile(ctx, "/greeting.txt", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := io.WriteString(f, "and goodbye\n"); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	f, err = c.Open(ctx, "/greeting.txt")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(os.Stdout, f); err != nil {
		log.Fatal(err)
	}
	// Output:
	// hello, canopy
	// hello, canopy
	// and goodbye
}

func ExampleClient_FS() {
	addr, stop := exampleServer()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.MkdirAll(ctx, "/data/2026/12", 0o755); err != nil {
		log.Fatal(err)
	}
	for _, p := range []string{"/data/README", "/data/2026/12/01.log"} {
		if err := c.WriteFile(ctx, p, []byte(p), 0o644); err != nil {
			log.Fatal(err)
		}
	}

	// c.FS is an io/fs file system, so the standard library's walkers
	// work on it. The walk visits entries in name order.
	err = fs.WalkDir(c.FS(ctx, "/data"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			fmt.Println(p + "/")
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Println(p, info.Size(), "bytes")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// ./
	// 2026/
	// 2026/12/
	// 2026/12/01.log 20 bytes
	// README 12 bytes
}

func ExampleClient_Stat_notExist() {
	addr, stop := exampleServer()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Errors are *fs.PathError values around a syscall.Errno: errors.Is
	// matches both the io/fs sentinel and the errno.
	_, err = c.Stat(ctx, "/no/such/file")
	fmt.Println(errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOENT))
	var pe *fs.PathError
	if errors.As(err, &pe) {
		fmt.Println(pe.Op, pe.Path)
	}
	// Output:
	// true true
	// stat /no/such/file
}
