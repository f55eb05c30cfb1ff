package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/canopyfs/canopy/internal/balance"
)

func newBalanceMoveCmd(g *globals) *cobra.Command {
	var to int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "move PATH --to GROUP",
		Short: "Move a virtual partition to another group's processes, online",
		Long: `Move the virtual partition mounted at PATH (made by canopy balance split)
to the processes of group GROUP (the partition those processes were
started for). Each process of GROUP starts a replica of it, which joins
its Raft group as a learner, catches up from a snapshot streamed in
chunks and the log, and becomes a voter; leadership then passes to one of
them (the only moment writes to PATH wait: the freeze), the replicas of
the groups it leaves are removed and their directories deleted, and the
routing table follows. Reads and writes go on throughout, and inode
numbers do not change: open files, a mount's node ids and a shell's
working directory keep working.

The move is recorded on the partition's root while it runs. Run again
after an interruption, it takes up where it stopped; if no one runs it
again, the routers' recovery pass finishes it once the record is ` + fmt.Sprint(balance.IntentTTL) + ` old.`,
		Example: "  canopy balance move /projects/big --to 2",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to < 0 || to > 1<<16-1 {
				return fmt.Errorf("--to %d: not a group", to)
			}
			ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
			defer cancel()
			e := balanceEnv(g)
			res, err := balance.Move(ctx, e, path.Clean(canon(args[0])), uint16(to), balance.MoveOptions{
				Joining: func(id uint64, addrs []string) func() {
					return showCatchUp(ctx, e, cmd.ErrOrStderr(), addrs, id, fmt.Sprintf("replica %d at group %d", id, to))
				},
			})
			if err != nil {
				return err
			}
			if asJSON {
				data, _ := json.Marshal(res)
				fmt.Fprintln(cmd.OutOrStdout(), string(data))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "moved %s (virtual partition %d, %d files) to group %d in %.2f s; writes paused %.1f ms\n",
				res.Path, res.VPart, res.Files, res.To, res.Seconds, res.FreezeMS)
			return nil
		},
	}
	cmd.Flags().IntVar(&to, "to", -1, "the group to move to (the partition its processes were started for)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.MarkFlagRequired("to")
	return cmd
}

// showCatchUp draws, on a terminal, how far replica id has caught up with
// the leader's log, until the returned stop is called.
func showCatchUp(ctx context.Context, e balance.Env, out io.Writer, addrs []string, id uint64, what string) (stop func()) {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		var bar *progressbar.ProgressBar
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				if bar != nil {
					bar.Finish()
				}
				return
			case <-tick.C:
			}
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			gr, err := e.Leader(lctx, addrs)
			cancel()
			if err != nil {
				continue
			}
			for _, m := range gr.Members {
				if m.Id != id {
					continue
				}
				if bar == nil {
					bar = progressbar.NewOptions64(int64(max(gr.Last, 1)), progressbar.OptionSetWriter(f),
						progressbar.OptionSetDescription(what+" catching up"), progressbar.OptionSetWidth(30),
						progressbar.OptionOnCompletion(func() { io.WriteString(f, "\n") }))
				}
				bar.ChangeMax64(int64(max(gr.Last, 1)))
				bar.Set64(int64(m.Match))
			}
		}
	}()
	return func() { close(done); <-ended }
}
