package sftp

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every channel's reader must
// end when its Client is closed, and transfers start none of their own.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
