package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/clientdata"
	"github.com/canopyfs/canopy/internal/data"
)

func newFsckCmd(g *globals) *cobra.Command {
	var f dataFlags
	var repair, asJSON bool
	var grace time.Duration
	var partition uint16
	cmd := &cobra.Command{
		Use:   "fsck",
		Short: "Check that the object store and the metadata agree",
		Long: `Check one partition's file data: objects in the store that no slice names
(orphans: left by a writer that died before it committed, or by a crash
during deletion) and slices whose objects are missing (data lost). With
--repair, orphans older than --grace are deleted and missing objects are
replaced by zeros, so the files that use them read zeros there instead of
failing. Exits with status 1 if anything was found.`,
		Example: "  canopy fsck\n  canopy fsck --repair --grace 1h",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.runData(&f, func(ctx context.Context, c *client.Client) error {
				vol, err := clientdata.Volume(ctx, c)
				if err != nil {
					return err
				}
				peers, closePeers, err := fsckPeers(ctx, g, c, partition)
				if err != nil {
					return err
				}
				defer closePeers()
				start := time.Now()
				rep, err := data.Fsck(ctx, vol.Store, clientdata.Admin(c, partition),
					data.FsckOptions{BlockSize: vol.BlockSize, Repair: repair, Grace: grace, Peers: peers})
				recordFsck(ctx, cmd, c, partition, start, rep, repair, err)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON {
					b, err := json.Marshal(rep)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "%s\n", b)
				} else {
					fmt.Fprintf(out, "store:           %s\n", vol.Store)
					fmt.Fprintf(out, "objects:         %d\n", rep.Objects)
					fmt.Fprintf(out, "slices in use:   %d\n", rep.Slices)
					fmt.Fprintf(out, "garbage slices:  %d\n", rep.Garbage)
					fmt.Fprintf(out, "orphan objects:  %d\n", len(rep.Orphans))
					for _, k := range rep.Orphans {
						fmt.Fprintf(out, "  orphan   %s\n", k)
					}
					fmt.Fprintf(out, "missing objects: %d\n", len(rep.MissingObjects))
					for _, k := range rep.MissingObjects {
						fmt.Fprintf(out, "  missing  %s\n", k)
					}
					if repair {
						fmt.Fprintf(out, "deleted %d orphans, replaced %d missing objects by zeros\n", rep.Deleted, rep.Zeroed)
					}
					if rep.Clean() {
						fmt.Fprintln(out, "clean")
					}
				}
				if !rep.Clean() {
					return fmt.Errorf("fsck: %d orphan objects, %d missing objects", len(rep.Orphans), len(rep.MissingObjects))
				}
				return nil
			})
		},
	}
	f.bind(cmd, false)
	cmd.Flags().BoolVar(&repair, "repair", false, "delete old orphans and replace missing objects by zeros")
	cmd.Flags().DurationVar(&grace, "grace", time.Hour, "repair: leave orphans younger than this (a writer may still commit them)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	cmd.Flags().Uint16Var(&partition, "partition", 0, "partition to check")
	return cmd
}

// fsckPeers dials the namespace's other partitions, from the routing
// table (none when the server has no tables, or no routes: a partition on
// its own), so that fsck takes no object of a file renamed to another
// partition for an orphan. The returned func closes what it dialed.
func fsckPeers(ctx context.Context, g *globals, c *client.Client, partition uint16) ([]data.Admin, func(), error) {
	var dialed []*client.Client
	closeAll := func() {
		for _, pc := range dialed {
			pc.Close()
		}
	}
	tables, err := c.Tables(ctx)
	if err != nil {
		return nil, closeAll, nil // no federation tables here: nothing to ask
	}
	opts, err := g.clientOptions()
	if err != nil {
		return nil, closeAll, err
	}
	var peers []data.Admin
	for _, r := range tables.Routes {
		if r.VPart == partition || len(r.Addrs) == 0 {
			continue
		}
		pc, err := client.Dial(strings.Join(r.Addrs, ","), opts)
		if err != nil {
			closeAll()
			return nil, func() {}, fmt.Errorf("fsck: partition %d: %w", r.VPart, err)
		}
		dialed = append(dialed, pc)
		peers = append(peers, clientdata.Admin(pc, r.VPart))
	}
	return peers, closeAll, nil
}

// recordFsck records a run of fsck on the partition's root, for `canopy
// status`; a run it cannot record (a credential that may not act as
// root) is only said on standard error.
func recordFsck(ctx context.Context, cmd *cobra.Command, c *client.Client, partition uint16, start time.Time, rep *data.FsckReport, repair bool, runErr error) {
	host, _ := os.Hostname()
	r := client.RunInfo{Start: start, Duration: time.Since(start), Host: host, Repair: repair}
	if runErr != nil {
		r.Err = runErr.Error()
	}
	if rep != nil {
		r.Objects, r.Orphans, r.Missing = uint64(rep.Objects), uint64(len(rep.Orphans)), uint64(len(rep.MissingObjects))
		r.OrphansDeleted, r.ObjectsDeleted, r.Zeroed = uint64(rep.Deleted), uint64(rep.Deleted), uint64(rep.Zeroed)
	}
	if err := c.RecordRun(ctx, partition, client.RunFsck, r); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "fsck: the run is not recorded for canopy status: %v\n", err)
	}
}
