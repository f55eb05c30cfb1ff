package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/posixacl"
)

// ACL attribute names, as the engine keeps them.
const (
	xattrACLAccess  = "system.posix_acl_access"
	xattrACLDefault = "system.posix_acl_default"
)

// aclEntryJSON is one entry in `canopy acl ... --json`.
type aclEntryJSON struct {
	Tag  string  `json:"tag"`          // user, group, mask or other
	ID   *uint32 `json:"id,omitempty"` // named users and groups only
	Perm string  `json:"perm"`         // as getfacl prints it: "rw-"
}

// aclJSON is `canopy acl get|set --json`.
type aclJSON struct {
	Path    string         `json:"path"`
	Owner   uint32         `json:"owner"`
	Group   uint32         `json:"group"`
	Mode    string         `json:"mode"`    // permission bits in octal
	Access  []aclEntryJSON `json:"access"`  // the mode's three entries when there is no ACL
	Default []aclEntryJSON `json:"default"` // empty when none
}

func toACLEntriesJSON(a posixacl.ACL) []aclEntryJSON {
	out := make([]aclEntryJSON, 0, len(a))
	for _, e := range a {
		j := aclEntryJSON{Perm: posixacl.PermString(e.Perm)}
		switch e.Tag {
		case posixacl.UserObj, posixacl.User:
			j.Tag = "user"
		case posixacl.GroupObj, posixacl.Group:
			j.Tag = "group"
		case posixacl.Mask:
			j.Tag = "mask"
		case posixacl.Other:
			j.Tag = "other"
		}
		if e.Tag == posixacl.User || e.Tag == posixacl.Group {
			id := e.ID
			j.ID = &id
		}
		out = append(out, j)
	}
	return out
}

// aclErr turns the ACL calls' errors into one line that says what is
// wrong.
func aclErr(p string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%s: no such file or directory", p)
	case errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%s: only the owner or root may change its ACL", p)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%s: default ACLs are on directories only", p)
	case errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("%s: invalid ACL (entries out of order, or named entries without a mask)", p)
	case errors.Is(err, syscall.EOPNOTSUPP):
		return fmt.Errorf("%s: symbolic links have no ACL", p)
	}
	return err
}

// aclState is a node's ACLs as the service holds them.
type aclState struct {
	attr   client.Attr
	access posixacl.ACL // from the mode when there is no ACL
	def    posixacl.ACL // nil when none
}

// readACL reads p's attributes and ACLs.
func readACL(ctx context.Context, c *client.Client, p string) (aclState, error) {
	fi, err := c.Stat(ctx, p)
	if err != nil {
		return aclState{}, err
	}
	s := aclState{attr: fi.Attr(), access: posixacl.FromMode(fi.Attr().Mode)}
	read := func(name string) (posixacl.ACL, error) {
		v, err := c.GetXattr(ctx, p, name)
		if errors.Is(err, syscall.ENODATA) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return posixacl.Decode(v)
	}
	a, err := read(xattrACLAccess)
	if err != nil {
		return aclState{}, err
	}
	if a != nil {
		s.access = a
	}
	if s.def, err = read(xattrACLDefault); err != nil {
		return aclState{}, err
	}
	return s, nil
}

func newACLCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Show and change POSIX ACLs",
		Long: "POSIX ACLs grant named users and groups access beyond the mode bits, limited by the mask\n" +
			"(the group bits of the mode); a directory's default ACL is inherited by what is created in it.\n" +
			"They are the attributes system.posix_acl_access and system.posix_acl_default, which setfacl\n" +
			"and getfacl read and write on a mount.",
		Example: "  canopy acl set /proj/f u:1000:rw\n  canopy acl set /proj d:u:1000:rwx,d:g:2000:rx\n  canopy acl get /proj/f --json",
	}
	var asJSON bool
	show := func(p string, s aclState) error {
		if asJSON {
			return json.NewEncoder(g.out).Encode(aclJSON{
				Path: p, Owner: s.attr.UID, Group: s.attr.GID, Mode: fmt.Sprintf("%04o", s.attr.Mode&0o7777),
				Access: toACLEntriesJSON(s.access), Default: toACLEntriesJSON(s.def),
			})
		}
		fmt.Fprintf(g.out, "# file: %s\n# owner: %d\n# group: %d\n", p, s.attr.UID, s.attr.GID)
		fmt.Fprint(g.out, s.access.String())
		for _, e := range s.def {
			fmt.Fprintf(g.out, "default:%s\n", e.Text())
		}
		return nil
	}
	get := &cobra.Command{
		Use: "get PATH", Short: "Show a node's access and default ACLs, as getfacl", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p := canon(args[0])
			return g.run(func(ctx context.Context, c *client.Client) error {
				s, err := readACL(ctx, c, p)
				if err != nil {
					return aclErr(p, err)
				}
				return show(p, s)
			})
		},
	}
	set := &cobra.Command{
		Use:   "set PATH ENTRIES",
		Short: "Add or change ACL entries, as setfacl -m (d: entries go to the default ACL)",
		Long: "ENTRIES is setfacl's text form, entries separated by commas: u:ID:PERMS, g:ID:PERMS, u::PERMS,\n" +
			"g::PERMS, m::PERMS, o::PERMS, each with a d: prefix for the default ACL. The mask is\n" +
			"recomputed to cover the group class unless one is given.",
		Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			p := canon(args[0])
			access, def, err := posixacl.Parse(args[1])
			if err != nil {
				return fmt.Errorf("acl set %s: %w", p, err)
			}
			if len(access) == 0 && len(def) == 0 {
				return fmt.Errorf("acl set %s: no entries given", p)
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				s, err := readACL(ctx, c, p)
				if err != nil {
					return aclErr(p, err)
				}
				if len(access) > 0 {
					if err := c.SetXattr(ctx, p, xattrACLAccess, posixacl.Merge(s.access, access).Encode(), 0); err != nil {
						return aclErr(p, err)
					}
				}
				if len(def) > 0 {
					base := s.def
					if base == nil {
						base = s.access // as setfacl: a new default ACL starts from the access ACL
					}
					if err := c.SetXattr(ctx, p, xattrACLDefault, posixacl.Merge(base, def).Encode(), 0); err != nil {
						return aclErr(p, err)
					}
				}
				if s, err = readACL(ctx, c, p); err != nil {
					return aclErr(p, err)
				}
				return show(p, s)
			})
		},
	}
	for _, c := range []*cobra.Command{get, set} {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	}
	cmd.AddCommand(get, set)
	return cmd
}
