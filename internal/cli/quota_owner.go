package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/bench"
)

// User and group quotas in `canopy quota`: --uid U or --gid G in place of
// a directory. A path, if given, only picks the partition (default /):
// each partition keeps its own user and group quotas.

// ownerQuotaJSON is one user or group quota in `canopy quota ... --json`.
type ownerQuotaJSON struct {
	Kind     string `json:"kind"` // "uid" or "gid"
	ID       uint32 `json:"id"`
	MaxFiles uint64 `json:"max_files"` // 0: no limit
	MaxBytes uint64 `json:"max_bytes"` // 0: no limit
	Files    uint64 `json:"files"`
	Bytes    uint64 `json:"bytes"`
	// Share: a partition's share of a namespace quota (asked of the
	// partition directly): its limits may be 0, and none is 2^64-1.
	Share bool `json:"share,omitempty"`
}

type ownerMismatchJSON struct {
	ownerQuotaJSON
	CountFiles uint64 `json:"count_files"`
	CountBytes uint64 `json:"count_bytes"`
}

func kindName(kind uint32) string {
	if kind == client.QuotaGroup {
		return "gid"
	}
	return "uid"
}

func toOwnerQuotaJSON(q client.OwnerQuota) ownerQuotaJSON {
	return ownerQuotaJSON{Kind: kindName(q.Kind), ID: q.ID, MaxFiles: q.MaxFiles, MaxBytes: q.MaxBytes, Files: q.Files, Bytes: q.Bytes, Share: q.Share}
}

// allIDs is the value of a bare --uid or --gid (ls: all of them).
const allIDs = "all"

// ownerFlags are a command's --uid and --gid.
type ownerFlags struct{ uid, gid string }

// add adds --uid and --gid to cmd; with all, a bare flag means every id.
func (o *ownerFlags) add(cmd *cobra.Command, all bool) {
	cmd.Flags().StringVar(&o.uid, "uid", "", "a user quota: of this uid instead of a directory")
	cmd.Flags().StringVar(&o.gid, "gid", "", "a group quota: of this gid instead of a directory")
	if all {
		cmd.Flags().Lookup("uid").NoOptDefVal = allIDs
		cmd.Flags().Lookup("gid").NoOptDefVal = allIDs
		cmd.Flags().Lookup("uid").Usage = "user quotas (all, or --uid=U for one)"
		cmd.Flags().Lookup("gid").Usage = "group quotas (all, or --gid=G for one)"
	}
}

// given reports whether --uid or --gid was given.
func (o *ownerFlags) given() bool { return o.uid != "" || o.gid != "" }

// parse returns the kind and id the flags name; all is a bare flag.
func (o *ownerFlags) parse() (kind, id uint32, all bool, err error) {
	if o.uid != "" && o.gid != "" {
		return 0, 0, false, errors.New("give --uid or --gid, not both")
	}
	kind, v, flag := client.QuotaUser, o.uid, "--uid"
	if o.gid != "" {
		kind, v, flag = client.QuotaGroup, o.gid, "--gid"
	}
	if v == allIDs {
		return kind, 0, true, nil
	}
	n, perr := strconv.ParseUint(v, 10, 32)
	if perr != nil {
		return 0, 0, false, fmt.Errorf("%s %q: not a number from 0 to 4294967295", flag, v)
	}
	return kind, uint32(n), false, nil
}

// ownerName is "uid 7" or "gid 7".
func ownerName(kind, id uint32) string {
	return kindName(kind) + " " + strconv.FormatUint(uint64(id), 10)
}

// ownerQuotaErr turns the owner quota calls' errors into one line.
func ownerQuotaErr(p string, kind, id uint32, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENODATA):
		return fmt.Errorf("no quota for %s in the partition of %s", ownerName(kind, id), p)
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%s: no such file or directory", p)
	case errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%s: only root may change quotas", ownerName(kind, id))
	}
	return err
}

// printOwnerQuotas prints owner quotas as a table or as JSON.
func printOwnerQuotas(g *globals, asJSON bool, qs []client.OwnerQuota) error {
	if asJSON {
		out := make([]ownerQuotaJSON, len(qs))
		for i, q := range qs {
			out[i] = toOwnerQuotaJSON(q)
		}
		return json.NewEncoder(g.out).Encode(out)
	}
	w := tabwriter.NewWriter(g.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tID\tFILES\tMAX FILES\tBYTES\tMAX BYTES")
	for _, q := range qs {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\n", kindName(q.Kind), q.ID, q.Files, quotaLimit(q.MaxFiles, false),
			bench.FormatSize(int64(q.Bytes)), quotaLimit(q.MaxBytes, true))
	}
	return w.Flush()
}

// quotaLimit formats a limit: "-" for none.
func quotaLimit(v uint64, size bool) string {
	switch {
	case v == 0:
		return "-"
	case size:
		return bench.FormatSize(int64(v))
	}
	return fmt.Sprint(v)
}

// partitionPath is the path that picks the partition of an owner quota
// command: args[0], or /.
func partitionPath(args []string) string {
	if len(args) == 1 {
		return canon(args[0])
	}
	return "/"
}

// setOwnerQuota is `canopy quota set --uid U|--gid G [PATH]`.
func setOwnerQuota(g *globals, o *ownerFlags, args []string, files uint64, setFiles, setBytes bool, maxBytes uint64, asJSON bool) error {
	kind, id, all, err := o.parse()
	if err != nil {
		return err
	}
	if all {
		return errors.New("quota set: --uid and --gid take a number")
	}
	p := partitionPath(args)
	return g.run(func(ctx context.Context, c *client.Client) error {
		maxFiles := files
		if !setFiles || !setBytes {
			if old, err := c.GetOwnerQuota(ctx, p, kind, id); err == nil {
				if !setFiles {
					maxFiles = old.MaxFiles
				}
				if !setBytes {
					maxBytes = old.MaxBytes
				}
			}
		}
		q, err := c.SetOwnerQuota(ctx, p, kind, id, maxFiles, maxBytes)
		if err != nil {
			return ownerQuotaErr(p, kind, id, err)
		}
		return printOwnerQuotas(g, asJSON, []client.OwnerQuota{q})
	})
}

// getOwnerQuotas is `canopy quota get|ls --uid[=U]|--gid[=G] [PATH]`.
func getOwnerQuotas(g *globals, o *ownerFlags, args []string, asJSON bool) error {
	kind, id, all, err := o.parse()
	if err != nil {
		return err
	}
	p := partitionPath(args)
	return g.run(func(ctx context.Context, c *client.Client) error {
		if !all {
			q, err := c.GetOwnerQuota(ctx, p, kind, id)
			if err != nil {
				return ownerQuotaErr(p, kind, id, err)
			}
			return printOwnerQuotas(g, asJSON, []client.OwnerQuota{q})
		}
		qs, err := c.OwnerQuotas(ctx, p)
		if err != nil {
			return ownerQuotaErr(p, kind, 0, err)
		}
		mine := qs[:0]
		for _, q := range qs {
			if q.Kind == kind {
				mine = append(mine, q)
			}
		}
		return printOwnerQuotas(g, asJSON, mine)
	})
}

// removeOwnerQuota is `canopy quota rm --uid U|--gid G [PATH]`.
func removeOwnerQuota(g *globals, o *ownerFlags, args []string) error {
	kind, id, all, err := o.parse()
	if err != nil {
		return err
	}
	if all {
		return errors.New("quota rm: --uid and --gid take a number")
	}
	p := partitionPath(args)
	return g.run(func(ctx context.Context, c *client.Client) error {
		return ownerQuotaErr(p, kind, id, c.RemoveOwnerQuota(ctx, p, kind, id))
	})
}

// isNumber reports whether s is a decimal number.
func isNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}
