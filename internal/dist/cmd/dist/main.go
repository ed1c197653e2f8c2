// Command dist builds berth's release artifacts without a docker daemon
// (make dist): static binaries (no cgo) for linux/amd64, linux/arm64 and
// darwin/arm64 with the version stamped, each packed as
// berth_VERSION_OS_ARCH.tar.gz; the reconciler's container image for
// linux/amd64 and linux/arm64 as image tarballs (docker load -i, or any
// tool that reads them: crane push, skopeo), built by internal/dist; and
// SHA256SUMS of them all.
//
//	go run ./internal/dist/cmd/dist [-out dist] [-version v1.2.3]
//
// The version defaults to git describe --tags --always --dirty. berth
// agent needs cgo (NVML) and is not among these: make dist packs this
// machine's cgo build for it (bin/berth_linux_amd64.tar.gz).
package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/dist"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type platform struct{ os, arch string }

var (
	binaries = []platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "arm64"}}
	images   = []string{"amd64", "arm64"}
)

func main() {
	out := flag.String("out", "dist", "directory the artifacts are written to (made if missing)")
	version := flag.String("version", "", "version stamped into berth (default: git describe --tags --always --dirty)")
	flag.Parse()
	if err := run(*out, *version); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

func run(out, version string) error {
	if version == "" {
		v, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
		if err != nil {
			return fmt.Errorf("git describe (give -version): %w", err)
		}
		version = strings.TrimSpace(string(v))
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	created := time.Now().UTC().Truncate(time.Second)
	if ts, err := exec.Command("git", "log", "-1", "--format=%ct").Output(); err == nil {
		var sec int64
		if _, err := fmt.Sscan(strings.TrimSpace(string(ts)), &sec); err == nil {
			created = time.Unix(sec, 0).UTC() // the commit's time: the same commit, the same image
		}
	}
	built := map[platform]string{}
	for _, p := range binaries {
		bin := filepath.Join(out, fmt.Sprintf("berth_%s_%s", p.os, p.arch), "berth")
		fmt.Printf("dist: building berth %s for %s/%s\n", version, p.os, p.arch)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", bin, "./cmd/berth")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.os, "GOARCH="+p.arch)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build for %s/%s: %w", p.os, p.arch, err)
		}
		built[p] = bin
		if err := pack(filepath.Join(out, fmt.Sprintf("berth_%s_%s_%s.tar.gz", version, p.os, p.arch)), bin, created); err != nil {
			return err
		}
	}
	for _, arch := range images {
		binary, err := os.ReadFile(built[platform{"linux", arch}])
		if err != nil {
			return err
		}
		img, err := dist.Image(binary, arch, created)
		if err != nil {
			return err
		}
		tag, err := name.NewTag("berth:" + strings.ReplaceAll(version, "+", "-"))
		if err != nil {
			return fmt.Errorf("image tag for version %q: %w", version, err)
		}
		path := filepath.Join(out, fmt.Sprintf("berth_%s_image_linux_%s.tar", version, arch))
		fmt.Printf("dist: writing image %s for linux/%s\n", tag, arch)
		if err := tarball.WriteToFile(path, tag, img); err != nil {
			return err
		}
	}
	return sums(out, version)
}

// pack writes bin as the one file, berth, of a tar.gz at path.
func pack(path, bin string, created time.Time) error {
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	err = tw.WriteHeader(&tar.Header{Name: "berth", Mode: 0o755, Size: int64(len(data)), ModTime: created, Typeflag: tar.TypeReg})
	if err == nil {
		_, err = tw.Write(data)
	}
	for _, c := range []func() error{tw.Close, zw.Close, f.Close} {
		if e := c(); err == nil {
			err = e
		}
	}
	return err
}

// sums writes SHA256SUMS of out's artifacts of version, as sha256sum -c
// reads it.
func sums(out, version string) error {
	paths, err := filepath.Glob(filepath.Join(out, "berth_"+version+"_*"))
	if err != nil {
		return err
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(data), filepath.Base(p))
	}
	fmt.Printf("dist: %d artifacts in %s, SHA256SUMS beside them\n", len(paths), out)
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(b.String()), 0o644)
}
