package cli

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
)

// callAt sends one call to the servers at addrs (a group's replicas, or one
// process), following NOT_LEADER, and decodes the reply into reply (nil:
// none). A refusal carries the server's message when it sent one.
func callAt(ctx context.Context, g *globals, addrs []string, m pb.Method, req, reply proto.Message) error {
	opts, err := g.clientOptions()
	if err != nil {
		return err
	}
	c, err := rpc.DialAny(addrs, rpc.ClientConfig{Secret: opts.Secret, TLS: opts.TLS, Token: opts.Token,
		CallTimeout: g.timeout, OpTimeout: g.timeout})
	if err != nil {
		return fmt.Errorf("%s at %v: %w", m, addrs, err)
	}
	defer c.Close()
	var data []byte
	if req != nil {
		data, _ = proto.Marshal(req)
	}
	st, rep, err := c.Call(ctx, uint16(m), rpc.Cred{}, data)
	if err != nil {
		return fmt.Errorf("%s at %v: %w", m, addrs, err)
	}
	if st != 0 {
		var d pb.ErrorDetail
		if proto.Unmarshal(rep, &d) == nil && d.Message != "" {
			return fmt.Errorf("%s: %w", d.Message, syscall.Errno(st))
		}
		return fmt.Errorf("%s at %v: %w", m, addrs, syscall.Errno(st))
	}
	if reply != nil {
		if err := proto.Unmarshal(rep, reply); err != nil {
			return fmt.Errorf("%s at %v: reply: %w", m, addrs, err)
		}
	}
	return nil
}

// groupLeader asks the replicas at addrs for their group until one knows a
// leader, and returns that leader's view of the group (members with their
// match and lag).
func groupLeader(ctx context.Context, g *globals, addrs []string) (*pb.GroupReply, error) {
	var last error
	for {
		for _, a := range addrs {
			gr, err := askGroup(ctx, g, a, false)
			if err != nil {
				last = err
				continue
			}
			if gr.Role == "single" {
				return gr, nil // a partition that is not replicated
			}
			if gr.LeaderAddr == "" {
				last = fmt.Errorf("replica at %s knows no leader", a)
				continue
			}
			if gr.Role != "Leader" {
				if lg, err := askGroup(ctx, g, gr.LeaderAddr, false); err == nil && lg.Role == "Leader" {
					return lg, nil
				}
				continue
			}
			return gr, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("find the leader among %v: %w (last: %v)", addrs, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// hostList asks the process serving addr which replicas it hosts.
func hostList(ctx context.Context, g *globals, addr string) (*pb.HostListReply, error) {
	var l pb.HostListReply
	if err := callAt(ctx, g, []string{addr}, pb.Method_HOST_LIST, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}
