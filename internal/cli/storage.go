package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/data"
	"github.com/canopyfs/canopy/internal/object"
)

// storageFlags choose a server's object store and tune the collector
// that runs next to it.
type storageFlags struct {
	url        string
	gcDelay    time.Duration
	gcGrace    time.Duration
	gcInterval time.Duration
	noGC       bool
}

func (s *storageFlags) bind(cmd *cobra.Command, def string) {
	fl := cmd.Flags()
	fl.StringVar(&s.url, "storage", "", "object store for file data: a directory, file:///dir or s3://bucket/prefix?endpoint=... ("+def+")")
	fl.DurationVar(&s.gcDelay, "gc-delay", 10*time.Minute, "keep the objects of deleted or overwritten data this long before the collector removes them")
	fl.DurationVar(&s.gcGrace, "gc-grace", time.Hour, "objects no slice names (a writer died before committing) are removed once this old")
	fl.DurationVar(&s.gcInterval, "gc-interval", time.Minute, "time between the collector's passes")
	fl.BoolVar(&s.noGC, "no-gc", false, "do not run the collector in this process")
}

// resolve returns the store URL: the flag (a plain directory made an
// absolute file:// URL), or for canopy up (dir != "") the directory
// DIR/objects.
func (s *storageFlags) resolve(dir string) (string, error) {
	local := ""
	switch {
	case strings.Contains(s.url, "://"):
		return s.url, nil
	case s.url != "":
		local = s.url // a directory: clients elsewhere need its absolute path
	case dir != "":
		local = filepath.Join(dir, "objects")
	default:
		return "", nil
	}
	abs, err := filepath.Abs(local)
	if err != nil {
		return "", fmt.Errorf("storage directory: %w", err)
	}
	return "file://" + abs, nil
}

// publicURL is the store URL without credentials, for VOLUME replies:
// clients bring their own.
func publicURL(raw string) string {
	if !strings.Contains(raw, "://") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// startCollector opens the object store and runs the collector of
// partition against the server at addr until the returned stop is called.
func (s *storageFlags) startCollector(storeURL, addr, secret string, useTLS bool, partition uint16, log *slog.Logger) (stop func(), err error) {
	if s.noGC || storeURL == "" {
		return func() {}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	store, err := object.Open(ctx, storeURL)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("storage: %w", err)
	}
	opts := client.Options{Secret: secret}
	if useTLS {
		// The collector talks to its own process over loopback.
		opts.TLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	}
	c, err := client.Dial(addr, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("collector: %w", err)
	}
	vol, err := c.Volume(ctx, client.Ino(uint64(partition)<<48|1))
	if err != nil {
		cancel()
		c.Close()
		return nil, fmt.Errorf("collector: %w", err)
	}
	col := data.NewCollector(store, c.DataAdmin(partition), data.CollectorConfig{
		Delay: s.gcDelay, Grace: s.gcGrace, Interval: s.gcInterval, BlockSize: vol.BlockSize,
		Logger: log.With("component", "collector"),
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		col.Run(ctx)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
			c.Close()
		})
	}, nil
}
