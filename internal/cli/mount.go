package cli

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/fuse"
	"github.com/canopyfs/canopy/internal/observe"
	"github.com/canopyfs/canopy/internal/protocol"
)

// readyFDEnv, set in a background mount's environment, names the file
// descriptor on which it reports the ready line to the command that
// started it.
const readyFDEnv = "CANOPY_MOUNT_READY_FD"

// readyTimeout bounds how long `canopy mount -d` waits for the background
// mount to be ready.
const readyTimeout = 60 * time.Second

// reexec returns the command that runs canopy with args; tests replace it.
var reexec = func(args []string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(self, args...), nil
}

type mountFlags struct {
	allowOther, defaultPerms, readOnly, background, debug bool
	attrTimeout, entryTimeout, negativeTimeout            time.Duration
	metricsListen, logFile                                string
	durability                                            string   // --durability: posix or strict
	options                                               string   // -o, applied over the flags (mountopts.go)
	bufferSize                                            sizeFlag // --buffer-size: bound on the mount's memory (mount_memory.go)
	cacheDir                                              string   // --cache-dir: on-disk read cache
	cacheSize                                             sizeFlag // --cache-size: its bound
}

func newMountCmd(g *globals) *cobra.Command {
	var o mountFlags
	cmd := &cobra.Command{
		Use:   "mount MOUNTPOINT",
		Short: "Mount the namespace with FUSE",
		Long: `Mount the Canopy namespace at MOUNTPOINT (an existing directory) with FUSE.
Every operation acts as the calling process (uid, gid and groups) and the
metadata service checks its permissions. It runs in the foreground until
SIGINT or SIGTERM, then unmounts (lazily if the mount is busy); -d runs it
in the background. It prints "canopy: mounted ADDR at MOUNTPOINT" once the
mount is usable. Mounting needs root (or fusermount).`,
		Example: "  canopy mount --addr 127.0.0.1:9400 /mnt/canopy\n" +
			"  canopy mount -d --allow-other --metrics-listen 127.0.0.1:9567 /mnt/canopy\n" +
			"  canopy umount /mnt/canopy",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyMountOptions(o.options, &o, &g.addr); err != nil {
				return err
			}
			if o.background && os.Getenv(readyFDEnv) == "" {
				return mountBackground(cmd, args[0], o.logFile)
			}
			return mountForeground(cmd, g, args[0], o)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.background, "background", "d", false, "run in the background once mounted")
	f.BoolVar(&o.allowOther, "allow-other", false, "let users other than the one mounting use the mount")
	f.BoolVar(&o.defaultPerms, "default-permissions", true, "let the kernel check permissions from the attributes it has (the server checks in any case); =false leaves every check to the server")
	f.BoolVar(&o.readOnly, "read-only", false, "mount read-only")
	f.StringVar(&o.durability, "durability", "posix", "posix: changes are answered once ordered in the server's log and made durable at fsync, fdatasync, O_SYNC writes, syncfs and unmount; strict: every change is answered once durable")
	o.bufferSize.v = client.DefaultBufferBytes
	f.StringVar(&o.cacheDir, "cache-dir", "", "keep blocks read in files under DIR as well (a read cache on local disk, bounded by --cache-size, kept across mounts)")
	o.cacheSize.v = client.DefaultCacheDirBytes
	f.Var(&o.cacheSize, "cache-size", "bound on --cache-dir (KiB, MiB, GiB suffixes)")
	f.Var(&o.bufferSize, "buffer-size", "bound on the mount's memory: the write buffers of all open files and the cache of blocks read, together (KiB, MiB, GiB suffixes); writers wait for room")
	f.DurationVar(&o.attrTimeout, "attr-timeout", fuse.DefaultAttrTimeout, "how long the kernel caches attributes")
	f.DurationVar(&o.entryTimeout, "entry-timeout", fuse.DefaultEntryTimeout, "how long the kernel caches name lookups")
	f.DurationVar(&o.negativeTimeout, "negative-timeout", 0, "how long a name found absent is taken as absent, and how long after a mkdir the mount answers itself for names not made through it (0: every lookup of an absent name asks the server, so a name another client makes is seen at once)")
	f.StringVar(&o.metricsListen, "metrics-listen", "", "serve Prometheus metrics, pprof and a status page on this address")
	f.StringVar(&o.logFile, "log", "", "append log lines to this file instead of stderr")
	f.BoolVar(&o.debug, "debug", false, "log every FUSE request and reply")
	f.StringVarP(&o.options, "options", "o", "", "mount options, comma-separated, as mount(8) takes them: allow_other, default_permissions, ro, rw, debug, "+
		"attr_timeout=S, entry_timeout=S, negative_timeout=S, buffer_size=SIZE, metrics=ADDR, log=FILE, addr=ADDR; _netdev, nofail and other generic options are accepted and left to mount(8) and systemd")
	return cmd
}

// mountForeground mounts, prints the ready line and serves until a signal
// or an unmount from outside.
func mountForeground(cmd *cobra.Command, g *globals, dir string, o mountFlags) error {
	logOut := cmd.ErrOrStderr()
	if o.logFile != "" {
		lf, err := os.OpenFile(o.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("log file: %w", err)
		}
		defer lf.Close()
		logOut = lf
	}
	log := slog.New(slog.NewTextHandler(logOut, nil))
	// A background mount may outlive the pipe its stderr was; a write to
	// it must fail, not kill the mount.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)

	copts, err := g.clientOptions()
	if err != nil {
		return err
	}
	if copts.Durability, err = client.ParseDurability(o.durability); err != nil {
		return err
	}
	if o.bufferSize.v < minBufferSize {
		return fmt.Errorf("--buffer-size must be at least %d MiB", minBufferSize>>20)
	}
	copts.Data.CacheBytes, copts.Data.BufferBytes = memorySplit(o.bufferSize.v)
	limitMemory(o.bufferSize.v, log)
	if o.cacheSize.v <= 0 {
		return fmt.Errorf("--cache-size must be positive")
	}
	if o.cacheDir != "" {
		if copts.Data.CacheDir, err = filepath.Abs(o.cacheDir); err != nil {
			return fmt.Errorf("--cache-dir: %w", err)
		}
		copts.Data.CacheDirBytes = o.cacheSize.v
	}
	copts.OnLocksLost = func(ino client.Ino) {
		log.Warn("file locks lost: the server did not hear from this mount within its lock timeout",
			"partition", protocol.PartitionOf(uint64(ino)))
	}
	c, err := client.Dial(g.addr, copts)
	if err != nil {
		return err
	}
	defer c.Close()
	opts := fuse.Options{
		AttrTimeout: o.attrTimeout, EntryTimeout: o.entryTimeout, NegativeTimeout: o.negativeTimeout,
		ReadOnly: o.readOnly, AllowOther: o.allowOther, NoDefaultPermissions: !o.defaultPerms,
		FsName: "canopy:" + g.addr, Logger: log, Debug: o.debug,
	}
	var reg *prometheus.Registry
	if o.metricsListen != "" {
		reg = observe.NewRegistry()
		opts.Metrics = reg
	}
	m, err := fuse.MountAt(c, dir, opts)
	if err != nil {
		return err
	}
	announceSession(cmd.Context(), c, m.Dir(), log)
	if reg != nil {
		obs, err := observe.Serve(o.metricsListen, reg, func() any {
			return map[string]any{"mountpoint": m.Dir(), "addr": g.addr}
		}, log)
		if err != nil {
			m.Close()
			return err
		}
		defer obs.Close()
		log.Info("metrics", "addr", obs.Addr().String())
		if unpublish, err := publishMount(m.Dir(), obs.Addr().String(), g.addr); err != nil {
			log.Warn("canopy stats --mount will not find this mount", "err", err)
		} else {
			defer unpublish()
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	if err := announce(cmd.OutOrStdout(), fmt.Sprintf("canopy: mounted %s at %s\n", g.addr, m.Dir())); err != nil {
		m.Close()
		return err
	}
	select {
	case s := <-sig:
		log.Info("unmounting", "signal", s.String(), "mountpoint", m.Dir())
		go func() {
			// A second signal while a busy mount drains: give up waiting.
			<-sig
			log.Warn("exiting with the mount detached but still in use")
			os.Exit(1)
		}()
		return m.Close()
	case <-m.Done():
		log.Info("unmounted", "mountpoint", m.Dir())
		return nil
	}
}

// announce prints the ready line: on the descriptor the starting command
// waits on when running in the background, on out otherwise.
func announce(out io.Writer, line string) error {
	fdText := os.Getenv(readyFDEnv)
	if fdText == "" {
		_, err := io.WriteString(out, line)
		return err
	}
	fd, err := strconv.Atoi(fdText)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", readyFDEnv, fdText, err)
	}
	f := os.NewFile(uintptr(fd), "ready")
	defer f.Close()
	_, err = io.WriteString(f, line)
	return err
}

// mountBackground starts this command again, detached in its own session,
// waits for its ready line, prints it and returns, leaving it to serve.
func mountBackground(cmd *cobra.Command, dir, logFile string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	args := []string{"mount"}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "background" {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	args = append(args, "--", dir)
	child, err := reexec(args)
	if err != nil {
		return fmt.Errorf("mount in the background: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	child.Env = append(child.Environ(), readyFDEnv+"=3")
	child.ExtraFiles = []*os.File{w}
	child.Stdin, child.Stdout = nil, nil
	child.Stderr = os.Stderr
	if logFile != "" {
		child.Stderr = nil
	}
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		w.Close()
		return fmt.Errorf("mount in the background: %w", err)
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if strings.HasPrefix(s, "canopy: mounted ") {
			fmt.Fprint(cmd.OutOrStdout(), s)
			fmt.Fprintf(cmd.ErrOrStderr(), "canopy: mount serving in the background as pid %d\n", child.Process.Pid)
			return nil
		}
		err := <-exited
		return fmt.Errorf("background mount failed: %v", err)
	case <-time.After(readyTimeout):
		child.Process.Kill()
		return fmt.Errorf("background mount not ready after %v", readyTimeout)
	}
}
