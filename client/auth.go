package client

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/auth"
)

// Credentials, kept by the root partition: each says what the holder of
// its token may do (see docs/security.md). A client presents its token
// with Options.Token. Managing credentials takes an admin credential (or,
// on a server that requires no token, none), acting as root.

// Credential describes one credential. The token is never part of it.
type Credential struct {
	// Name names the credential, and is part of its token.
	Name string `json:"name"`
	// Path is the subtree the holder sees as its whole namespace; "/" = all.
	Path string `json:"path"`
	// UIDs are the uid ranges it may act as, "1000-1999,3000"; "" = any.
	UIDs string `json:"uids,omitempty"`
	// GIDs are the gid ranges (primary and supplementary) likewise.
	GIDs string `json:"gids,omitempty"`
	// ReadOnly refuses every change.
	ReadOnly bool `json:"read_only,omitempty"`
	// AllowRoot believes uid 0; without it root acts as SquashUID:SquashGID.
	AllowRoot bool `json:"allow_root,omitempty"`
	// Admin may manage credentials and the federation tables.
	Admin bool `json:"admin,omitempty"`
	// Router may assert the credentials of the clients it forwards for.
	Router bool `json:"router,omitempty"`
	// CertSHA256 is the SHA-256 fingerprint, in hex (colons allowed), of
	// a client certificate that authenticates as this credential over
	// mutual TLS instead of its token; "" = none.
	CertSHA256 string `json:"cert_sha256,omitempty"`
	// SquashUID is the uid root acts as without AllowRoot (default 65534).
	SquashUID uint32 `json:"squash_uid"`
	// SquashGID is the gid root acts as without AllowRoot (default 65534).
	SquashGID uint32 `json:"squash_gid"`
	// Addresses are the CIDR prefixes it may connect from; none = anywhere.
	Addresses []string `json:"addresses,omitempty"`
	// Expires is when it stops working; zero = never.
	Expires time.Time `json:"expires,omitzero"`
	// Created is when it was made.
	Created time.Time `json:"created,omitzero"`
	// Generation counts its tokens: 1, plus one per rotation.
	Generation uint64 `json:"generation"`
	// ExpiresIn, for AddCredential, makes it expire this long after it is made.
	ExpiresIn time.Duration `json:"-"`
}

// AddCredential creates a credential and returns its token, which is
// shown nowhere else: the service keeps only its hash (the token is made
// here, and only the hash travels). EEXIST if the name is taken.
func (c *Client) AddCredential(ctx context.Context, cr Credential) (string, *Credential, error) {
	w, err := credentialToPB(&cr)
	if err != nil {
		return "", nil, err
	}
	token, hash, err := auth.NewToken(cr.Name)
	if err != nil {
		return "", nil, err
	}
	w.TokenHash = hash[:]
	var r pb.CredentialReply
	req := &pb.AuthAddRequest{Ino: uint64(RootIno), Credential: w, ExpiresInNs: int64(cr.ExpiresIn)}
	if err := c.call(ctx, pb.Method_AUTH_ADD, req, &r, "auth add", cr.Name); err != nil {
		return "", nil, err
	}
	return token, credentialFromPB(r.Credential), nil
}

// Credentials returns every credential, in name order.
func (c *Client) Credentials(ctx context.Context) ([]Credential, error) {
	var r pb.AuthListReply
	if err := c.call(ctx, pb.Method_AUTH_LIST, &pb.AuthNameRequest{Ino: uint64(RootIno)}, &r, "auth ls", "/"); err != nil {
		return nil, err
	}
	out := make([]Credential, 0, len(r.Credentials))
	for _, w := range r.Credentials {
		out = append(out, *credentialFromPB(w))
	}
	return out, nil
}

// Credential returns the credential named name (ENOENT if none).
func (c *Client) Credential(ctx context.Context, name string) (*Credential, error) {
	var r pb.AuthListReply
	if err := c.call(ctx, pb.Method_AUTH_LIST, &pb.AuthNameRequest{Ino: uint64(RootIno), Name: name}, &r, "auth show", name); err != nil {
		return nil, err
	}
	if len(r.Credentials) != 1 {
		return nil, fmt.Errorf("auth show %s: %d credentials in the reply", name, len(r.Credentials))
	}
	return credentialFromPB(r.Credentials[0]), nil
}

// Whoami returns the credential the client's token names, as the service
// sees it (ENOENT for a client that presented no token).
func (c *Client) Whoami(ctx context.Context) (*Credential, error) {
	var r pb.CredentialReply
	if err := c.call(ctx, pb.Method_AUTH_WHOAMI, &pb.Empty{}, &r, "auth whoami", "/"); err != nil {
		return nil, err
	}
	return credentialFromPB(r.Credential), nil
}

// RemoveCredential revokes a credential: connections bound to it are
// refused from their next call on.
func (c *Client) RemoveCredential(ctx context.Context, name string) error {
	return c.call(ctx, pb.Method_AUTH_REMOVE, &pb.AuthNameRequest{Ino: uint64(RootIno), Name: name}, nil, "auth rm", name)
}

// RotateCredential gives a credential a new token and returns it; the old
// token stops working, on open connections too.
func (c *Client) RotateCredential(ctx context.Context, name string) (string, error) {
	token, hash, err := auth.NewToken(name)
	if err != nil {
		return "", err
	}
	req := &pb.AuthRotateRequest{Ino: uint64(RootIno), Name: name, TokenHash: hash[:]}
	if err := c.call(ctx, pb.Method_AUTH_ROTATE, req, &pb.CredentialReply{}, "auth rotate", name); err != nil {
		return "", err
	}
	return token, nil
}

func credentialToPB(cr *Credential) (*pb.Credential, error) {
	w := &pb.Credential{Name: cr.Name, Path: cr.Path, ReadOnly: cr.ReadOnly, AllowRoot: cr.AllowRoot, Admin: cr.Admin,
		Router: cr.Router, SquashUid: cr.SquashUID, SquashGid: cr.SquashGID}
	if cr.CertSHA256 != "" {
		fp, err := auth.ParseFingerprint(cr.CertSHA256)
		if err != nil {
			return nil, err
		}
		w.CertSha256 = fp[:]
	}
	for _, ids := range []struct {
		s   string
		out *[]*pb.IDRange
	}{{cr.UIDs, &w.Uids}, {cr.GIDs, &w.Gids}} {
		rs, err := auth.ParseRanges(ids.s)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			*ids.out = append(*ids.out, &pb.IDRange{Lo: r.Lo, Hi: r.Hi})
		}
	}
	for _, a := range cr.Addresses {
		ps, err := auth.ParsePrefixes(a)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			w.Addresses = append(w.Addresses, p.String())
		}
	}
	return w, nil
}

func credentialFromPB(w *pb.Credential) *Credential {
	cr := &Credential{Name: w.Name, Path: w.Path, ReadOnly: w.ReadOnly, AllowRoot: w.AllowRoot, Admin: w.Admin,
		Router: w.Router, SquashUID: w.SquashUid, SquashGID: w.SquashGid, Addresses: w.Addresses, Generation: w.Generation}
	var rs []auth.Range
	for _, r := range w.Uids {
		rs = append(rs, auth.Range{Lo: r.Lo, Hi: r.Hi})
	}
	cr.UIDs = auth.FormatRanges(rs)
	rs = rs[:0]
	for _, r := range w.Gids {
		rs = append(rs, auth.Range{Lo: r.Lo, Hi: r.Hi})
	}
	cr.GIDs = auth.FormatRanges(rs)
	if len(w.CertSha256) > 0 {
		cr.CertSHA256 = hex.EncodeToString(w.CertSha256)
	}
	if w.ExpiresNs != 0 {
		cr.Expires = time.Unix(0, w.ExpiresNs)
	}
	if w.CreatedNs != 0 {
		cr.Created = time.Unix(0, w.CreatedNs)
	}
	return cr
}
