package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Two databases of one server are distinct: a table made in one is not in
// the other.
func TestNewDatabase(t *testing.T) {
	srv := pgtest.Start(t)
	a, b := srv.NewDatabase(t), srv.NewDatabase(t)
	require.NotEqual(t, a, b)
	ctx := context.Background()
	exec := func(url, sql string) error {
		conn, err := pgconn.Connect(ctx, url)
		require.NoError(t, err)
		defer conn.Close(ctx)
		return conn.Exec(ctx, sql).Close()
	}
	require.NoError(t, exec(a, "CREATE TABLE only_in_a (x int)"))
	require.NoError(t, exec(a, "SELECT * FROM only_in_a"))
	require.Error(t, exec(b, "SELECT * FROM only_in_a"))
}

// The local cluster requires the password over TCP.
func TestPasswordRequired(t *testing.T) {
	srv := pgtest.Start(t)
	if srv.External() {
		t.Skip("an existing server's authentication is its own")
	}
	cfg, err := pgconn.ParseConfig(srv.URL)
	require.NoError(t, err)
	cfg.Password = "wrong"
	_, err = pgconn.ConnectConfig(context.Background(), cfg)
	require.Error(t, err)
}
