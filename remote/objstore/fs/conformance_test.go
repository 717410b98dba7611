package fs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/remote/objstore/objstoretest"
)

func TestConformance(t *testing.T) {
	objstoretest.RunConformance(t, func(t *testing.T) objstore.Store {
		s, err := fs.Open(t.TempDir(), fs.Options{})
		require.NoError(t, err)
		return s
	})
}
