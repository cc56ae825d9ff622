package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
)

// readmeExamples returns the sluice command lines of the README's CLI section, split
// into words as sh would (single and double quotes; no expansions are used there),
// with comments dropped.
func readmeExamples(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	s := string(b)
	start := strings.Index(s, "## The command-line client")
	require.GreaterOrEqual(t, start, 0)
	s = s[start+1:]
	s = s[:strings.Index(s, "\n## ")]
	block := s[strings.Index(s, "```sh\n")+len("```sh\n"):]
	block = block[:strings.Index(block, "```")]
	var out [][]string
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "sluice ") {
			continue
		}
		words := shellWords(t, line)
		out = append(out, words[1:])
	}
	require.GreaterOrEqual(t, len(out), 10, "the README's examples")
	return out
}

// shellWords splits a line as sh would for the simple cases the README uses.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			require.GreaterOrEqual(t, end, 0, "unbalanced quote in %q", line)
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '#' && !inWord:
			i = len(line)
		case c == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// Every example of the README's CLI section, run as written, in order, against a
// private sshd: ~/.ssh/config makes "box" (passwordUser on one sshd) and "bastion"
// (a second sshd) real.
func TestREADMEExamples(t *testing.T) {
	isolateEnv(t)
	_, home := needPasswordUser(t)
	box := newSSHDForUser(t, sshdtest.SSHDOptions{})
	bastion := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	writeUserSSHConfig(t,
		strings.Replace(hostBlock("box", box), "User "+box.User, "User "+passwordUser, 1)+hostBlock("bastion", bastion),
		box, bastion)
	// The examples use fixed names in the login directory: clear what a failed run left.
	clean := func() {
		for _, n := range []string{"big.iso", "backup", ".big.iso.sluice-part"} {
			os.RemoveAll(filepath.Join(home, n))
		}
		os.Remove("/tmp/README.copy")
	}
	clean()
	t.Cleanup(clean)

	examples := readmeExamples(t) // read before the Chdir
	work := t.TempDir()
	t.Chdir(work)
	iso, data := randomFile(t, work, "big.iso", 3<<20+1)
	photos := filepath.Join(work, "photos")
	require.NoError(t, os.MkdirAll(filepath.Join(photos, "raw"), 0o755))
	randomFile(t, photos, "a.jpg", 1000)
	randomFile(t, photos, "b.jpg", 2000)
	randomFile(t, photos, "raw/c.cr2", 3000)
	require.NoError(t, os.WriteFile("README.md", []byte("# readme\n"), 0o644))

	jpg, err := os.ReadFile(filepath.Join(photos, "a.jpg"))
	require.NoError(t, err)
	before := strings.Count(bastion.Log(), "Accepted publickey")
	ran := map[string]bool{}
	for _, args := range examples {
		r := runCLI(t, args...)
		require.Equal(t, exitOK, r.code, "sluice %s: %s", strings.Join(args, " "), r.stderr)
		ran[args[0]] = true
		if args[0] == "cat" {
			require.Equal(t, string(jpg)+string(data), r.stdout, "cat writes the files one after another")
		}
	}
	for _, c := range []string{"cat", "mv", "chmod", "df"} {
		require.True(t, ran[c], "the README shows %s", c)
	}
	// What the examples did, checked.
	got, err := os.ReadFile(filepath.Join(work, "copy.iso"))
	require.NoError(t, err)
	require.Equal(t, data, got)
	got, err = os.ReadFile(filepath.Join(work, "limited.iso"))
	require.NoError(t, err)
	require.Equal(t, data, got)
	got, err = os.ReadFile(iso)
	require.NoError(t, err)
	require.Equal(t, data, got)
	// get -r photos restore landed as restore/photos; photos/ as the contents of flat;
	// the glob into restore/.
	requireSameFiles(t, photos, filepath.Join(work, "restore", "photos"))
	requireSameFiles(t, photos, filepath.Join(work, "flat"))
	requireEntries(t, filepath.Join(work, "restore"), "photos", "a.jpg", "b.jpg")
	got, err = os.ReadFile(filepath.Join(work, "restore", "a.jpg"))
	require.NoError(t, err)
	require.Equal(t, jpg, got)
	require.NoDirExists(t, filepath.Join(home, "backup"), "rm -r removed it")
	require.NoFileExists(t, filepath.Join(home, "big.iso"), "mv moved it into backup")
	require.FileExists(t, "/tmp/README.copy")
	require.Equal(t, before+1, strings.Count(bastion.Log(), "Accepted publickey"), "-J went through the bastion")
}
