package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sftp/internal/testserver"
	"github.com/stretchr/testify/require"
)

// sshString appends an SSH string (uint32 length, bytes).
func sshString(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}

// framed puts the packet length in front of body (type, id, payload).
func framed(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// namePacket is an SSH_FXP_NAME reply naming one path, without attributes.
func namePacket(id uint32, name string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{testserver.TypeName}, id)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = sshString(sshString(b, name), name)
	return framed(binary.BigEndian.AppendUint32(b, 0))
}

// Item 7 of issue 19, the file case: a server whose ~ is a file named .bashrc cannot
// have it land as DIR/.bashrc (no name was typed for it); it lands under a name the
// user types. OpenSSH cannot say this (its ~ is its working directory), a hostile
// server can: here REALPATH "." answers it.
func TestHostileHomeIsAFile(t *testing.T) {
	srv := testserver.New(testserver.Options{Corrupt: func(req testserver.Request, _ []byte) [][]byte {
		if req.Type == testserver.TypeRealpath && req.Path == "." {
			return [][]byte{namePacket(req.ID, "/victim/.bashrc")}
		}
		return nil
	}})
	t.Cleanup(func() { srv.Close() })
	require.NoError(t, srv.MkdirAll("/victim", 0o755))
	require.NoError(t, srv.WriteFile("/victim/.bashrc", []byte("the server's bashrc"), 0o644))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".bashrc"), []byte("mine"), 0o644))

	for _, into := range []string{dir, dir + "/"} {
		for _, flags := range [][]string{nil, {"-p"}, {"-r", "-p", "--sync"}} {
			r := runApp(t, inProcess(srv), append(append([]string{"get"}, flags...), "~", into)...)
			require.Equal(t, exitFail, r.code, "stderr: %s", r.stderr)
			require.Contains(t, r.stderr, "give the destination's file name")
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, ".bashrc"))
	require.NoError(t, err)
	require.Equal(t, "mine", string(got))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing else was written")

	r := runApp(t, inProcess(srv), "get", "~", filepath.Join(dir, "copy"))
	requireOK(t, r)
	got, err = os.ReadFile(filepath.Join(dir, "copy"))
	require.NoError(t, err)
	require.Equal(t, "the server's bashrc", string(got))
}

// usersGroupsReply is a users-groups-by-id@openssh.com reply naming every id asked
// for with name.
func usersGroupsReply(id uint32, users, groups int, name string) []byte {
	list := func(n int) string {
		var b []byte
		for range n {
			b = sshString(b, name)
		}
		return string(b)
	}
	b := binary.BigEndian.AppendUint32([]byte{testserver.TypeExtendedReply}, id)
	return framed(sshString(sshString(b, list(users)), list(groups)))
}

// Item 11 of issue 19: names from users-groups-by-id may be 256 KiB; ls -l of 300
// entries printed 57 MB. An owner or group name too long for a column is shown by
// its id, so each line stays short whatever the server names.
func TestHostileOwnerNamesInLs(t *testing.T) {
	const ext = "users-groups-by-id@openssh.com"
	huge := strings.Repeat("\x1b[2J", 64<<10) // 256 KiB, and four times that escaped
	srv := testserver.New(testserver.Options{
		Extensions: map[string]string{ext: "1"},
		Corrupt: func(req testserver.Request, _ []byte) [][]byte {
			if req.Type == testserver.TypeExtended && req.ExtName == ext {
				return [][]byte{usersGroupsReply(req.ID, 1, 1, huge)}
			}
			return nil
		},
	})
	t.Cleanup(func() { srv.Close() })
	require.NoError(t, srv.MkdirAll("/d", 0o755))
	for i := range 300 {
		require.NoError(t, srv.WriteFile("/d/f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("0", i/26), nil, 0o644))
	}
	r := runApp(t, inProcess(srv), "ls", "-l", "/d")
	requireOK(t, r)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 300)
	for _, l := range lines {
		require.Less(t, len(l), 120, "line %q", l)
		require.NotContains(t, l, `\x1b[2J`, "the absurd name is not shown")
	}
	requireNoRawControls(t, r.stdout)
}
