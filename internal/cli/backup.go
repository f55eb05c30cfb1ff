package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/object"
)

// Automatic metadata backups: a server started with --backup-interval
// (and an object store) dumps its partition, in the binary dump form, to
// the store under meta-backup/p<PARTITION>/<TIME>-<LSN>.dump every
// interval when the log has moved, keeping the newest --backup-keep.
// `canopy load --from-store URL` restores the newest.

const backupPrefix = "meta-backup/"

// backupFlags are the server flags of the backups.
type backupFlags struct {
	interval time.Duration
	keep     int
}

func (b *backupFlags) bind(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&b.interval, "backup-interval", time.Hour, "dump the metadata to the object store under meta-backup/ this often (0: never)")
	cmd.Flags().IntVar(&b.keep, "backup-keep", 24, "metadata backups kept in the object store")
}

// backupKeyPrefix is where partition part's backups are.
func backupKeyPrefix(part uint16) string { return fmt.Sprintf("%sp%d/", backupPrefix, part) }

// start runs the backups of partition part of the server at addr until
// stop is called.
func (b *backupFlags) start(storeURL, addr, secret string, useTLS bool, part uint16, log *slog.Logger) (stop func(), err error) {
	if b.interval <= 0 || storeURL == "" {
		return func() {}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	store, err := object.Open(ctx, storeURL)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("backups: storage: %w", err)
	}
	opts := client.Options{Secret: secret, Cred: &client.Cred{}}
	if useTLS {
		opts.TLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // its own process, over loopback
	}
	c, err := client.Dial(addr, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("backups: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(b.interval)
		defer t.Stop()
		last := ^uint64(0)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			lsn, err := backupOnce(ctx, c, store, part, last, b.keep)
			if err != nil {
				log.Error("metadata backup", "err", err)
				continue
			}
			if lsn != last {
				log.Info("metadata backup", "partition", part, "lsn", lsn)
			}
			last = lsn
		}
	}()
	return func() { cancel(); <-done; c.Close() }, nil
}

// backupOnce writes one backup of partition part unless its log position
// is still skip, then deletes the backups beyond the newest keep. It
// returns the position backed up.
func backupOnce(ctx context.Context, c *client.Client, store object.Store, part uint16, skip uint64, keep int) (uint64, error) {
	st, err := c.Status(ctx, part)
	if err != nil {
		return skip, err
	}
	if st.LSN == skip {
		return skip, nil
	}
	var buf bytes.Buffer
	sum := sha256.New()
	info, err := c.Dump(ctx, part, io.MultiWriter(&buf, sum), func(i client.DumpInfo) error {
		h := dumpHeader{i.Partition, i.LSN, i.Nodes, i.Total}.append(nil)
		buf.Write(h)
		return nil
	}, nil)
	if err != nil {
		return skip, err
	}
	// The header went to buf alone; the checksum covers the namespace.
	buf.Write(sum.Sum(nil))
	// By time first: a partition restored from a backup starts its log
	// over, and its backups must still sort after the older ones.
	key := fmt.Sprintf("%s%s-%020d.dump", backupKeyPrefix(part), time.Now().UTC().Format("20060102T150405.000000000Z"), info.LSN)
	if err := store.Put(ctx, key, buf.Bytes()); err != nil {
		return skip, fmt.Errorf("put %s: %w", key, err)
	}
	if err := object.Sync(ctx, store); err != nil {
		return skip, err
	}
	list, err := store.List(ctx, backupKeyPrefix(part), "", 0)
	if err != nil {
		return info.LSN, err
	}
	for i := 0; i+max(keep, 1) < len(list); i++ { // sorted by key: oldest first
		if err := store.Delete(ctx, list[i].Key); err != nil {
			return info.LSN, err
		}
	}
	return info.LSN, nil
}

// newestBackup opens the newest backup of partition part in the store.
func newestBackup(ctx context.Context, storeURL string, part uint16) (io.ReadCloser, string, error) {
	store, err := object.Open(ctx, storeURL)
	if err != nil {
		return nil, "", fmt.Errorf("storage: %w", err)
	}
	list, err := store.List(ctx, backupKeyPrefix(part), "", 0)
	if err != nil {
		return nil, "", err
	}
	var keys []string
	for _, o := range list {
		if strings.HasSuffix(o.Key, ".dump") {
			keys = append(keys, o.Key)
		}
	}
	if len(keys) == 0 {
		return nil, "", fmt.Errorf("no backup of partition %d under %s in %s", part, backupKeyPrefix(part), store)
	}
	key := keys[len(keys)-1]
	r, err := store.Get(ctx, key, 0, -1)
	return r, key, err
}
