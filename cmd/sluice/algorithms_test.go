package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// The algorithm keywords' lists, as OpenSSH reads them: plain, +, - and ^, names and
// patterns; x/crypto's insecure algorithms only when named exactly.
func TestAlgorithmLists(t *testing.T) {
	t.Parallel()
	defCiphers := ssh.SupportedAlgorithms().Ciphers
	defKex := ssh.SupportedAlgorithms().KeyExchanges
	defMACs := ssh.SupportedAlgorithms().MACs
	for _, tc := range []struct {
		kind algorithmKind
		v    string
		want []string
	}{
		{cipherKind, "aes128-ctr,aes256-ctr", []string{"aes128-ctr", "aes256-ctr"}},
		{cipherKind, "aes256-ctr,umac-64@openssh.com", []string{"aes256-ctr"}}, // a name x/crypto lacks is left out
		{cipherKind, "aes*-ctr", []string{"aes128-ctr", "aes192-ctr", "aes256-ctr"}},
		{cipherKind, "+arcfour", append(defCiphers[:len(defCiphers):len(defCiphers)], "arcfour")},
		{cipherKind, "+aes128-ctr", defCiphers}, // already there: the order stays
		{cipherKind, "-aes*-ctr", without(defCiphers, "aes128-ctr", "aes192-ctr", "aes256-ctr")},
		{cipherKind, "^aes256-ctr", append([]string{"aes256-ctr"}, without(defCiphers, "aes256-ctr")...)},
		{cipherKind, "aes128-cbc", []string{"aes128-cbc"}},
		{kexKind, "+diffie-hellman-group14-sha1", append(defKex[:len(defKex):len(defKex)], "diffie-hellman-group14-sha1")},
		{kexKind, "^curve25519-sha256", append([]string{"curve25519-sha256"}, without(defKex, "curve25519-sha256")...)},
		{macKind, "hmac-sha1-96,hmac-sha2-256", []string{"hmac-sha1-96", "hmac-sha2-256"}},
		{macKind, "-hmac-sha1", without(defMACs, "hmac-sha1")},
		{hostKeyKind, "ssh-ed25519,ecdsa-sha2-nistp256", []string{"ssh-ed25519", "ecdsa-sha2-nistp256"}},
	} {
		got, err := tc.kind.list(tc.v)
		require.NoError(t, err, "%s %s", tc.kind.keyword, tc.v)
		require.Equal(t, tc.want, got, "%s %s", tc.kind.keyword, tc.v)
	}

	// A pattern never brings in an insecure algorithm: it must be named.
	got, err := cipherKind.list("+*cbc")
	require.Error(t, err, "%v", got)
	require.ErrorContains(t, err, "ssh_config: Ciphers: unknown cipher *cbc")
	got, err = kexKind.list("+diffie-hellman-group14-*")
	require.NoError(t, err)
	require.NotContains(t, got, "diffie-hellman-group14-sha1")
	got, err = macKind.list("hmac-sha1*")
	require.NoError(t, err)
	require.Equal(t, []string{"hmac-sha1"}, got)

	for _, v := range []string{"rot13", "+rot13", "^rot13,md5"} {
		_, err := cipherKind.list(v)
		require.ErrorContains(t, err, "unknown cipher", v)
	}
	_, err = macKind.list("umac-64@openssh.com")
	require.ErrorContains(t, err, "ssh_config: MACs: unknown MAC umac-64@openssh.com; want one of hmac-sha2-256-etm@openssh.com")
}

// without is list less names, in list's order.
func without(list []string, names ...string) []string {
	var out []string
	for _, s := range list {
		keep := true
		for _, n := range names {
			keep = keep && s != n
		}
		if keep {
			out = append(out, s)
		}
	}
	return out
}
