// Package dist builds berth's release artifacts without a docker daemon:
// the container image of the reconciler as an image tarball
// (go-containerregistry), from a static berth binary. The Dockerfile
// builds the same contents for those with docker: the files of rootfs/
// (a passwd and group with the nonroot user, 65532) and the binary at
// /usr/local/bin/berth, on an empty base. The binary carries its own CA
// roots (golang.org/x/crypto/x509roots/fallback, used where the system
// has none), so the image needs no certificate bundle.
package dist

import (
	"archive/tar"
	"bytes"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

//go:embed rootfs
var rootfs embed.FS

// BinaryPath is where the image holds berth.
const BinaryPath = "/usr/local/bin/berth"

// User is the image's user, nonroot in rootfs/etc/passwd.
const User = "65532:65532"

// Image returns berth's image for linux/arch: one layer with rootfs/ and
// binary (a static berth built for linux/arch) at BinaryPath; berth as
// the entrypoint, --help its default argument, the nonroot user, the
// dashboard's port 4680. Every file's time is created, so the same binary
// gives the same image.
func Image(binary []byte, arch string, created time.Time) (v1.Image, error) {
	layer, err := layerOf(binary, created)
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "berth internal/dist", Comment: "rootfs and berth"}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = arch, "linux", v1.Time{Time: created}
	cf.Config = v1.Config{
		Entrypoint:   []string{BinaryPath},
		Cmd:          []string{"--help"},
		User:         User,
		WorkingDir:   "/",
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		ExposedPorts: map[string]struct{}{"4680/tcp": {}},
		Labels:       map[string]string{"org.opencontainers.image.source": "https://github.com/berth-dev/berth"},
	}
	return mutate.ConfigFile(img, cf)
}

// layerOf is the image's one layer: rootfs/'s directories and files, /tmp
// (world-writable, sticky) and binary at BinaryPath.
func layerOf(binary []byte, created time.Time) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: created})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: created}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	err := fs.WalkDir(rootfs, "rootfs", func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == "rootfs" {
			return err
		}
		name := path[len("rootfs/"):]
		if d.IsDir() {
			return dir(name, 0o755)
		}
		data, err := rootfs.ReadFile(path)
		if err != nil {
			return err
		}
		return file(name, 0o644, data)
	})
	for _, d := range []string{"tmp", "usr", "usr/local", "usr/local/bin"} {
		if err == nil {
			mode := int64(0o755)
			if d == "tmp" {
				mode = 0o1777
			}
			err = dir(d, mode)
		}
	}
	if err == nil {
		err = file(BinaryPath[1:], 0o755, binary)
	}
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	data := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}
