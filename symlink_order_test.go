package sftp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// asyncssh takes SYMLINK in OpenSSH's order only from clients whose SSH version names
// OpenSSH or paramiko; every other server's order is told by its extensions.
func TestAsyncsshDraftSymlink(t *testing.T) {
	for _, tc := range []struct {
		server, client string
		draft          bool
	}{
		{"SSH-2.0-AsyncSSH_2.10.1", "SSH-2.0-Go", true},
		{"SSH-2.0-AsyncSSH_2.10.1", "SSH-2.0-OpenSSH_9.2p1 Debian-2", false},
		{"SSH-2.0-AsyncSSH_2.10.1", "SSH-2.0-paramiko_2.12.0", false},
		{"SSH-2.0-OpenSSH_9.2p1", "SSH-2.0-Go", false},
		{"SSH-2.0-dropbear_2022.83", "SSH-2.0-Go", false},
		{"", "", false},
	} {
		require.Equal(t, tc.draft, asyncsshDraftSymlink([]byte(tc.server), []byte(tc.client)), "%q / %q", tc.server, tc.client)
	}
}
