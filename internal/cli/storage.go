package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/clientdata"
	"github.com/canopyfs/canopy/internal/data"
	"github.com/canopyfs/canopy/internal/object"
	"github.com/canopyfs/canopy/internal/protocol"
)

// storageFlags choose a server's object store and tune the collector
// that runs next to it.
type storageFlags struct {
	url        string
	gcDelay    time.Duration
	gcGrace    time.Duration
	gcInterval time.Duration
	noGC       bool
	backup     backupFlags // automatic metadata backups; see backup.go
}

func (s *storageFlags) bind(cmd *cobra.Command, def string) {
	fl := cmd.Flags()
	fl.StringVar(&s.url, "storage", "", "object store for file data: a directory, file:///dir or s3://bucket/prefix?endpoint=... ("+def+")")
	fl.DurationVar(&s.gcDelay, "gc-delay", 10*time.Minute, "keep the objects of deleted or overwritten data this long before the collector removes them")
	fl.DurationVar(&s.gcGrace, "gc-grace", time.Hour, "objects no slice names (a writer died before committing) are removed once this old")
	fl.DurationVar(&s.gcInterval, "gc-interval", time.Minute, "time between the collector's passes")
	fl.BoolVar(&s.noGC, "no-gc", false, "do not run the collector, nor the flusher that stores small files' inline bytes as objects, in this process")
	s.backup.bind(cmd)
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

// startStoreJobs opens the object store and runs, against the server
// at addr, partition's flusher (which stores the bytes of small files the
// partition holds inline as objects) and its collector, until the
// returned stop is called; with --no-gc, neither (another process runs
// them). peers are the addresses of the
// namespace's other partitions (by partition), whose lists of slices the
// collector's orphan sweep consults: files renamed there from partition
// keep its slice ids.
func (s *storageFlags) startStoreJobs(storeURL, addr, secret, token string, useTLS bool, partition uint16, peers map[uint16]string,
	log *slog.Logger) (stop func(), err error) {
	if s.noGC || storeURL == "" {
		return func() {}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	store, err := object.Open(ctx, storeURL)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("storage: %w", err)
	}
	opts := client.Options{Secret: secret, Token: token}
	if useTLS {
		// The jobs talk to their own process over loopback.
		opts.TLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	}
	c, err := client.Dial(addr, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("collector: %w", err)
	}
	var peerClients []*client.Client
	closeAll := func() {
		for _, pc := range peerClients {
			pc.Close()
		}
		c.Close()
	}
	vol, err := c.Volume(ctx, client.Ino(protocol.RootIno(partition)))
	if err != nil {
		cancel()
		closeAll()
		return nil, fmt.Errorf("collector: %w", err)
	}
	var jobs sync.WaitGroup
	flusher := data.NewFlusher(store, clientdata.InlineAdmin(c, partition), data.FlusherConfig{
		BlockSize: vol.BlockSize, Logger: log.With("component", "flusher"),
	})
	jobs.Go(func() { flusher.Run(ctx) })
	var admins []data.Admin
	for _, part := range slices.Sorted(maps.Keys(peers)) {
		pc, err := client.Dial(peers[part], opts)
		if err != nil {
			cancel()
			jobs.Wait()
			closeAll()
			return nil, fmt.Errorf("collector: partition %d: %w", part, err)
		}
		peerClients = append(peerClients, pc)
		admins = append(admins, clientdata.Admin(pc, part))
	}
	col := data.NewCollector(store, clientdata.Admin(c, partition), data.CollectorConfig{
		Delay: s.gcDelay, Grace: s.gcGrace, Interval: s.gcInterval, BlockSize: vol.BlockSize,
		Logger: log.With("component", "collector"),
		Report: collectorReport(c, partition, log),
		Peers:  admins,
	})
	jobs.Go(func() { col.Run(ctx) })
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			jobs.Wait()
			closeAll()
		})
	}, nil
}

// collectorReport records each reported pass of the collector on its
// partition's root, for `canopy status`; a pass it cannot record is
// logged only.
func collectorReport(c *client.Client, partition uint16, log *slog.Logger) func(context.Context, data.Pass) {
	host, _ := os.Hostname()
	return func(ctx context.Context, p data.Pass) {
		r := client.RunInfo{Start: p.Start, Duration: p.Duration, Host: host,
			SlicesPurged: uint64(p.Collect.Slices), ObjectsDeleted: uint64(p.Collect.Objects + p.Orphans),
			Swept: p.Swept, OrphansDeleted: uint64(p.Orphans)}
		if p.Err != nil {
			r.Err = p.Err.Error()
		}
		if err := c.RecordRun(ctx, partition, client.RunCollector, r); err != nil && ctx.Err() == nil {
			log.Warn("collector: record the pass", "partition", partition, "err", err)
		}
	}
}
