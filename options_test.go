package sftp

import "time"

// withStripeMinRTT lets tests stripe on loopback, where the client would not.
func withStripeMinRTT(d time.Duration) Option {
	return func(o *options) error {
		o.stripeMinRTT = d
		return nil
	}
}
