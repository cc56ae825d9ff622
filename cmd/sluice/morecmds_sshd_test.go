package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
)

// mv, chmod, df and cat, through a private sshd as "box".
func TestMvChmodDfCat(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	writeUserSSHConfig(t, hostBlock("box", s), s)
	dir := t.TempDir()
	_, a := randomFile(t, dir, "a.txt", 1000)
	_, b := randomFile(t, dir, "b.txt", 2000)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))

	// cat: several files, one after another; a glob too.
	r := runCLI(t, "cat", "box:"+dir+"/a.txt", "box:"+dir+"/b.txt")
	requireOK(t, r)
	require.Equal(t, string(a)+string(b), r.stdout)
	r = runCLI(t, "cat", "box:"+dir+"/*.txt")
	requireOK(t, r)
	require.Equal(t, string(a)+string(b), r.stdout)
	r = runCLI(t, "cat", "box:"+dir+"/nope")
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: cat: no such file or directory: "+dir+"/nope\n", r.stderr)

	// chmod: octal and symbolic.
	mode := func(name string) fs.FileMode {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		return fi.Mode().Perm()
	}
	r = runCLI(t, "chmod", "600", "box:"+dir+"/a.txt")
	requireOK(t, r)
	require.Equal(t, fs.FileMode(0o600), mode("a.txt"))
	r = runCLI(t, "chmod", "g+r,o=r", "box:"+dir+"/*.txt")
	requireOK(t, r)
	require.Equal(t, fs.FileMode(0o644), mode("a.txt"))
	require.Equal(t, fs.FileMode(0o644), mode("b.txt"))
	r = runCLI(t, "chmod", "a-w,u+x", "box:"+dir+"/b.txt")
	requireOK(t, r)
	require.Equal(t, fs.FileMode(0o544), mode("b.txt"))
	r = runCLI(t, "chmod", "u+q", "box:"+dir+"/b.txt")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `unknown permission 'q'`)

	// mv: onto a name, into a directory, several into a directory.
	r = runCLI(t, "mv", "box:"+dir+"/a.txt", "box:"+dir+"/c.txt")
	requireOK(t, r)
	require.NoFileExists(t, filepath.Join(dir, "a.txt"))
	require.FileExists(t, filepath.Join(dir, "c.txt"))
	r = runCLI(t, "mv", "box:"+dir+"/c.txt", "box:"+dir+"/sub")
	requireOK(t, r)
	require.FileExists(t, filepath.Join(dir, "sub", "c.txt"))
	r = runCLI(t, "mv", "box:"+dir+"/b.txt", "box:"+dir+"/sub/c.txt", "box:"+dir)
	requireOK(t, r)
	requireEntries(t, dir, "b.txt", "c.txt", "sub")
	r = runCLI(t, "mv", "box:"+dir+"/b.txt", "box:"+dir+"/c.txt", "box:"+dir+"/nodir")
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "not a directory")

	// df: a header and one line per path, as df(1).
	r = runCLI(t, "df", "-h", "box:"+dir)
	requireOK(t, r)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 2, r.stdout)
	require.Regexp(t, `^\s*Size\s+Used\s+Avail\s+Use%\s+Path\s*$`, lines[0])
	require.Regexp(t, `^\s*[\d.]+[KMGTPE]?\s+[\d.]+[KMGTPE]?\s+[\d.]+[KMGTPE]?\s+\d+%\s+`+regexp.QuoteMeta(dir)+`\s*$`, lines[1])
	r = runCLI(t, "df", "box:"+dir)
	requireOK(t, r)
	require.Regexp(t, `1K-blocks`, r.stdout)
}

// - is standard output for get and standard input for put: a stream, written as it
// comes; the upload goes to a part name first, renamed when complete.
func TestStdinStdout(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	writeUserSSHConfig(t, hostBlock("box", s), s)
	dir := t.TempDir()
	_, data := randomFile(t, dir, "f.bin", 3<<20+7)
	r := runCLI(t, "get", "box:"+dir+"/f.bin", "-")
	requireOK(t, r)
	require.Equal(t, string(data), r.stdout)

	up := filepath.Join(dir, "up.bin")
	r = runApp(t, func(a *app) { a.stdin = bytes.NewReader(data) }, "put", "-", "box:"+up)
	requireOK(t, r)
	got, err := os.ReadFile(up)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.NoFileExists(t, filepath.Join(dir, ".up.bin.sluice-part"))

	r = runApp(t, func(a *app) { a.stdin = bytes.NewReader(data) }, "put", "-", "box:"+dir)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "is a directory: standard input has no name")
	r = runCLI(t, "get", "-r", "box:"+dir, "-")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "get: -r does not apply when LOCAL is - (standard output)")
}

// help pages and the completion script.
func TestHelpPagesAndCompletion(t *testing.T) {
	for _, name := range commandNames() {
		r := runCLI(t, "help", name)
		requireOK(t, r)
		require.Contains(t, r.stdout, "Usage: sluice [flags] "+commands[name].synopsis)
		require.NotEmpty(t, helpPages[name], name)
	}
	r := runCLI(t, "help", "get")
	require.Contains(t, r.stdout, "--fail-fast")
	require.Contains(t, r.stdout, "get -r box:~ restore")
	r = runCLI(t, "help", "frob")
	require.Equal(t, exitUsage, r.code)

	r = runCLI(t, "completion", "bash")
	requireOK(t, r)
	require.Contains(t, r.stdout, "complete -o filenames -F _sluice sluice")
	require.Contains(t, r.stdout, "--fail-fast")
	if bash, err := exec.LookPath("bash"); err == nil {
		cmd := exec.Command(bash, "-n")
		cmd.Stdin = strings.NewReader(r.stdout)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "bash -n: %s", out)
		// Completing "sluice g" and "sluice get --fa" in a real bash.
		script := r.stdout + `
COMP_WORDS=(sluice g); COMP_CWORD=1; _sluice; echo "${COMPREPLY[*]}"
COMP_WORDS=(sluice get --fa); COMP_CWORD=2; _sluice; echo "${COMPREPLY[*]}"
`
		out, err = exec.Command(bash, "-c", script).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Equal(t, "get\n--fail-fast\n", string(out))
	}
}
