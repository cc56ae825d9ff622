package sftp

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// Harness: the package-wide leak check.
//
// TestMain checks that no test leaves a goroutine behind: every channel's reader and
// writer must end when its Client is closed, and every goroutine a transfer starts
// (its workers, its lanes' closes) must end before the call returns or the Client
// closes. tsNoLeaks (testserver_env_test.go) says which test leaked.
func TestMain(m *testing.M) {
	skipExamplesWithoutSFTPServer()
	goleak.VerifyTestMain(m)
}

// skipExamplesWithoutSFTPServer leaves the examples out, as -skip '^Example' would,
// where OpenSSH's sftp-server is not installed: each runs against it (see
// example_test.go), and an example cannot skip itself, so one that failed to start
// its server would end the whole test binary. Tests skip by themselves.
func skipExamplesWithoutSFTPServer() {
	if sshdtest.Available() {
		return
	}
	flag.Parse()
	skip := flag.Lookup("test.skip")
	if skip == nil {
		return
	}
	if skip.Value.String() != "" {
		fmt.Fprintln(os.Stderr, "sftp-server is not installed: the examples will fail (-skip is given, so they are not left out)")
		return
	}
	fmt.Fprintln(os.Stderr, "sftp-server is not installed (apt-get install openssh-sftp-server): skipping the examples")
	if err := skip.Value.Set("^Example"); err != nil {
		panic(err)
	}
}
