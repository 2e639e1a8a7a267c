package ckptcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hclsimple"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
	"github.com/caravan-nomad/caravan/driver/store/s3store"
	"github.com/caravan-nomad/caravan/internal/bytesize"
)

// storeFile is a -store-config file: the plugin config's store block.
type storeFile struct {
	Store storeBlock `hcl:"store,block"`
}

type storeBlock struct {
	Endpoint        string `hcl:"endpoint"`
	Bucket          string `hcl:"bucket"`
	Prefix          string `hcl:"prefix,optional"`
	Region          string `hcl:"region,optional"`
	TLS             *bool  `hcl:"tls,optional"`
	CACert          string `hcl:"ca_cert,optional"`
	PathStyle       bool   `hcl:"path_style,optional"`
	CredentialsFile string `hcl:"credentials_file,optional"`
}

// readStoreConfig reads a store block from path (HCL, or JSON when it ends
// in .json), with the plugin's defaults (tls = true).
func readStoreConfig(path string) (s3store.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return s3store.Config{}, fmt.Errorf("-store-config: %w", err)
	}
	name := path
	if !strings.HasSuffix(name, ".json") {
		name += ".hcl" // hclsimple picks the syntax by the name
	}
	var f storeFile
	if err := hclsimple.Decode(name, b, nil, &f); err != nil {
		return s3store.Config{}, fmt.Errorf("-store-config: %w", err)
	}
	sb := f.Store
	c := s3store.Config{Endpoint: sb.Endpoint, Bucket: sb.Bucket, Prefix: sb.Prefix, Region: sb.Region, TLS: true,
		CACertFile: sb.CACert, PathStyle: sb.PathStyle, CredentialsFile: sb.CredentialsFile}
	if sb.TLS != nil {
		c.TLS = *sb.TLS
	}
	return c, nil
}

// openS3 opens the S3 store a -store-config file names.
func openS3(path string) (*store.Store, error) {
	c, err := readStoreConfig(path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := s3store.New(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("-store-config %s: %w", path, err)
	}
	return objectstore.Open(b, store.Options{})
}

// migrateTimeout bounds the copy of one key.
const migrateTimeout = 30 * time.Minute

// migrate copies the newest generation of every key of s (or of the KEYs
// given) into the S3 store the file to names, with its node and meta (so
// its step and sequence still order the key's next commits). A key the
// destination already holds at that step is committed again only if newer
// (ErrStale is reported and skipped).
func migrate(s *store.Store, args []string, w io.Writer, to string) error {
	if to == "" {
		return fmt.Errorf("%w: migrate needs -to-store-config FILE", errUsage)
	}
	dst, err := openS3(to)
	if err != nil {
		return err
	}
	keys, err := s.Keys()
	if err != nil {
		return err
	}
	if len(args) > 0 {
		keys = keys[:0]
		for _, a := range args {
			k, err := store.ParseKey(a)
			if err != nil {
				return err
			}
			keys = append(keys, k)
		}
	}
	tmp, err := os.MkdirTemp("", "caravan-migrate-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, k := range keys {
		if err := migrateKey(s, dst, k, filepath.Join(tmp, "ckpt"), w); err != nil {
			return fmt.Errorf("migrate %s: %w", k, err)
		}
	}
	fmt.Fprintf(w, "migrated %d keys to %s\n", len(keys), dst.Backend())
	return nil
}

func migrateKey(src, dst *store.Store, k store.Key, dir string, w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
	defer cancel()
	_ = os.RemoveAll(dir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	res, err := src.Restore(ctx, k, dir)
	if err != nil {
		return err
	}
	m, st, err := dst.Commit(ctx, k, dir, res.Manifest.Node, res.Manifest.Meta)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: generation %d -> %d (%s, %s uploaded)\n", k, res.Manifest.Generation, m.Generation,
		bytesize.Human(st.Bytes), bytesize.Human(st.NewBytes))
	return nil
}
