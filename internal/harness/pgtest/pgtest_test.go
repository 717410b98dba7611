package pgtest_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/pgtest"
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

// The proxy passes traffic and cuts each connection once its budget is
// spent: a query through a connection with a budget too small for the
// startup fails, one without a budget works.
func TestCutProxy(t *testing.T) {
	srv := pgtest.Start(t)
	p := pgtest.NewCutProxy(t, net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port)), 1, 0, 0)
	cfg, err := pgconn.ParseConfig(srv.URL)
	require.NoError(t, err)
	cfg.Host, cfg.Port = "127.0.0.1", uint16(portOf(t, p.Addr))
	ctx := context.Background()
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, conn.Exec(ctx, "SELECT 1").Close())
	conn.Close(ctx)
	require.Zero(t, p.Cuts())

	p.SetBudget(20, 40)
	_, err = pgconn.ConnectConfig(ctx, cfg)
	require.Error(t, err)
	require.Equal(t, int64(1), p.Cuts())
}

func portOf(t *testing.T, addr string) int {
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return n
}
