package sftp

import (
	"io"
	"time"
)

// withStripeMinRTT lets tests stripe on loopback, where the client would not.
func withStripeMinRTT(d time.Duration) Option {
	return func(o *options) error {
		o.stripeMinRTT = d
		return nil
	}
}

// withStallGrace sets how long a channel's Write may stay blocked after its call
// gave up before the channel is given up (writeStallGrace).
func withStallGrace(d time.Duration) Option {
	return func(o *options) error {
		o.stallGrace = d
		return nil
	}
}

// withBeforeSiblingOpen runs hook before a transfer opens its file on another lane.
func withBeforeSiblingOpen(hook func(name string)) Option {
	return func(o *options) error {
		o.beforeSiblingOpen = hook
		return nil
	}
}

// withStreamWrap puts wrap between each SSH channel and the Client.
func withStreamWrap(wrap func(io.Reader, io.WriteCloser) (io.Reader, io.WriteCloser)) Option {
	return func(o *options) error {
		o.wrapStreams = wrap
		return nil
	}
}

// withChannelsPerConn sets how many channels share one SSH connection before the
// Client dials another (WithDialer).
func withChannelsPerConn(n int) Option {
	return func(o *options) error {
		o.channelsPerConn = n
		return nil
	}
}

// withSpan sets W, the out-of-order span of transfers (maxSpan), for tests that need
// its effects at a few hundred KiB.
func withSpan(n int64) Option {
	return func(o *options) error {
		o.span = n
		return nil
	}
}

// withStripeFrom sets how large a transfer must be to stripe (stripeMin).
func withStripeFrom(n int64) Option {
	return func(o *options) error {
		o.stripeFrom = n
		return nil
	}
}
