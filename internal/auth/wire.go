package auth

import (
	"crypto/sha256"
	"fmt"
	"net/netip"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// FromWire converts a credential from its wire form and validates it.
// The hash must be a SHA-256 sum.
func FromWire(w *pb.Credential) (*Credential, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: none", ErrInvalid)
	}
	c := &Credential{
		Name: w.Name, Path: w.Path, ReadOnly: w.ReadOnly, AllowRoot: w.AllowRoot, Admin: w.Admin, Router: w.Router,
		SquashUID: w.SquashUid, SquashGID: w.SquashGid, Expires: w.ExpiresNs, Created: w.CreatedNs,
		Generation: w.Generation,
	}
	if len(w.TokenHash) != sha256.Size {
		return nil, fmt.Errorf("%w: token hash of %d bytes", ErrInvalid, len(w.TokenHash))
	}
	copy(c.Hash[:], w.TokenHash)
	switch len(w.CertSha256) {
	case 0:
	case sha256.Size:
		copy(c.Cert[:], w.CertSha256)
	default:
		return nil, fmt.Errorf("%w: certificate fingerprint of %d bytes", ErrInvalid, len(w.CertSha256))
	}
	if len(w.Uids) > MaxRanges || len(w.Gids) > MaxRanges || len(w.Addresses) > MaxAddresses {
		return nil, fmt.Errorf("%w: too many ranges or addresses", ErrInvalid)
	}
	for _, r := range w.Uids {
		c.UIDs = append(c.UIDs, Range{Lo: r.GetLo(), Hi: r.GetHi()})
	}
	for _, r := range w.Gids {
		c.GIDs = append(c.GIDs, Range{Lo: r.GetLo(), Hi: r.GetHi()})
	}
	for _, a := range w.Addresses {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return nil, fmt.Errorf("%w: address %q", ErrInvalid, a)
		}
		c.Addresses = append(c.Addresses, p)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// ToWire converts c to its wire form; withHash includes the token's hash
// (for the log and checkpoints, never for replies).
func (c *Credential) ToWire(withHash bool) *pb.Credential {
	w := &pb.Credential{
		Name: c.Name, Path: c.Path, ReadOnly: c.ReadOnly, AllowRoot: c.AllowRoot, Admin: c.Admin, Router: c.Router,
		SquashUid: c.SquashUID, SquashGid: c.SquashGID, ExpiresNs: c.Expires, CreatedNs: c.Created,
		Generation: c.Generation,
	}
	if withHash {
		w.TokenHash = c.Hash[:]
	}
	if c.HasCert() {
		w.CertSha256 = c.Cert[:]
	}
	for _, r := range c.UIDs {
		w.Uids = append(w.Uids, &pb.IDRange{Lo: r.Lo, Hi: r.Hi})
	}
	for _, r := range c.GIDs {
		w.Gids = append(w.Gids, &pb.IDRange{Lo: r.Lo, Hi: r.Hi})
	}
	for _, p := range c.Addresses {
		w.Addresses = append(w.Addresses, p.String())
	}
	return w
}
