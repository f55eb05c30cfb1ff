package s3

// Anonymous access. Off unless the gateway is started with an identity
// for it (Config.Anonymous, `canopy gateway s3 --anonymous`): then a
// request that carries no credentials at all is served as that identity
// (by default nobody, 65534:65534), and Canopy's permission checks decide
// what it may read and write, as they do for a key's identity. versitygw
// admits such a request only to a bucket whose policy grants public
// access, so every bucket reports a policy that grants all to everyone
// (publicPolicy); versitygw itself still refuses anonymous bucket
// listings, bucket creation, copies, multipart uploads and multi-deletes.
// A request with a wrong signature or an unknown key is refused as
// before: only one without any credentials is anonymous.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/canopyfs/canopy/client"
)

// NobodyID is the uid and gid anonymous requests act as by default.
const NobodyID = 65534

// ParseAnonymous parses an identity for anonymous requests, "UID[:GID]"
// (the gid defaults to the uid).
func ParseAnonymous(s string) (client.Cred, error) {
	u, g, hasG := strings.Cut(s, ":")
	uid, err := strconv.ParseUint(u, 10, 32)
	if err != nil {
		return client.Cred{}, fmt.Errorf("anonymous identity %q: uid: %w", s, err)
	}
	gid := uid
	if hasG {
		if gid, err = strconv.ParseUint(g, 10, 32); err != nil {
			return client.Cred{}, fmt.Errorf("anonymous identity %q: gid: %w", s, err)
		}
	}
	return client.Cred{UID: uint32(uid), GID: uint32(gid)}, nil
}

// anonymousClient returns the client for a request without an account:
// the anonymous identity's where anonymous access is on, the gateway's own
// otherwise (versitygw then refuses every such request before it reaches
// an object).
func (b *Backend) anonymousClient() *client.Client {
	if b.anon != nil {
		return b.c.As(*b.anon)
	}
	return b.c
}

// publicPolicy is the bucket policy reported where anonymous access is
// on: everything, to everyone, in bucket.
func publicPolicy(bucket string) []byte {
	type statement struct {
		Effect    string   `json:"Effect"`
		Principal string   `json:"Principal"`
		Action    []string `json:"Action"`
		Resource  []string `json:"Resource"`
	}
	p := struct {
		Version   string      `json:"Version"`
		Statement []statement `json:"Statement"`
	}{"2012-10-17", []statement{{Effect: "Allow", Principal: "*", Action: []string{"s3:*"},
		Resource: []string{"arn:aws:s3:::" + bucket, "arn:aws:s3:::" + bucket + "/*"}}}}
	out, _ := json.Marshal(p) // a struct of strings always encodes
	return out
}
