package netpipe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/vi"
)

// openProvider opens a VI provider on ep's one link for module name, with
// descriptors of up to maxTransfer bytes (zero: vi's default), and returns
// it with the connect timeout to use.
func openProvider(name string, ep Endpoint, maxTransfer int) (*vi.Provider, time.Duration, error) {
	if len(ep.Devices) != 1 {
		return nil, 0, fmt.Errorf("%s: the %s module runs on one link, not %d", name, name, len(ep.Devices))
	}
	if ep.Role == Transmitter && len(ep.PeerMACs) != 1 {
		return nil, 0, fmt.Errorf("%s: %w", name, errNoPeerMAC)
	}
	timeout := ep.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	p, err := vi.Open(ep.Devices[0], vi.Options{
		Config:      nic.Config{EtherType: ep.Filter.EtherType, JobKey: ep.Filter.JobKey},
		SpinTime:    ep.Spin,
		PeerTimeout: timeout,
		MaxTransfer: maxTransfer,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("%s: open: %w", name, err)
	}
	return p, timeout, nil
}

var errNoPeerMAC = errors.New("the transmitter needs the receiver's MAC")

// connectVI connects v: the receiver waits for the transmitter's request to
// discriminator and accepts it; the transmitter repeats its request until
// accepted. Both give up after 6 timeouts.
func connectVI(ctx context.Context, name string, p *vi.Provider, v *vi.VI, ep Endpoint, timeout time.Duration, discriminator uint64) error {
	hctx, cancel := context.WithTimeout(ctx, 6*timeout)
	defer cancel()
	if ep.Role == Receiver {
		req, err := p.ConnectWait(hctx, discriminator)
		if err != nil {
			return fmt.Errorf("%s: wait for the transmitter: %w", name, err)
		}
		if err := req.Accept(v); err != nil {
			return fmt.Errorf("%s: accept: %w", name, err)
		}
		return nil
	}
	if err := v.ConnectRequest(hctx, vi.Address{MAC: ep.PeerMACs[0], Discriminator: discriminator}); err != nil {
		return fmt.Errorf("%s: connect to %v: %w", name, ep.PeerMACs[0], err)
	}
	return nil
}
