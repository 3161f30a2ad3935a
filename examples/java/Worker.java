// A settle worker in the advisory form, with the PostgreSQL JDBC driver.
//
// THREADS threads, each with its own connection: an advisory delivery is held
// by the session that claimed it (its key is locked there), so the same
// connection handles and settles it. Each delivery is settled with ack, or
// retry_after with a back-off that grows with the attempt; a poison row
// reaches max_attempts and goes to the dead letter. A worker that dies takes
// its keys with its sessions, and its rows are ready again at once. SIGTERM or
// Ctrl-C: no new claims, each thread finishes and settles its delivery, then
// the JVM exits.
//
//   javac -cp postgresql.jar Worker.java
//   PGHOST=db.internal PGDATABASE=app QUEUE=jobs java -cp postgresql.jar:. Worker
//
// Connection settings come from PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

public class Worker {
    static final String QUEUE = env("QUEUE", "jobs");
    static final int THREADS = Integer.parseInt(env("THREADS", "4"));
    static final double BACKOFF_SECONDS = Double.parseDouble(env("BACKOFF_SECONDS", "1"));
    static final long IDLE_MS = 500;
    static final String NOT_HELD = "SQ006"; // settle's SQLSTATE: this session does not hold the row
    static volatile boolean stopping = false;

    static String env(String name, String fallback) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? fallback : v;
    }

    static Connection connect() throws SQLException {
        String url = "jdbc:postgresql://" + env("PGHOST", "localhost") + ":" + env("PGPORT", "5432")
            + "/" + env("PGDATABASE", env("PGUSER", "postgres"));
        Properties props = new Properties();
        props.setProperty("user", env("PGUSER", System.getProperty("user.name")));
        if (System.getenv("PGPASSWORD") != null) props.setProperty("password", System.getenv("PGPASSWORD"));
        return DriverManager.getConnection(url, props); // autocommit, as the advisory form wants
    }

    /** The job itself; throw to have it retried. (Here: simulated work, reading the two
     *  fields it needs from the payload's JSON text; a real handler parses it with its
     *  JSON library.) */
    static void handle(String payload, int attempt) throws Exception {
        var m = java.util.regex.Pattern.compile("\"(work_ms|fail_first)\": (\\d+)").matcher(payload);
        int failFirst = 0;
        while (m.find()) {
            if (m.group(1).equals("work_ms")) Thread.sleep(Long.parseLong(m.group(2)));
            else failFirst = Integer.parseInt(m.group(2));
        }
        if (payload.contains("\"poison\": true") || attempt <= failFirst) throw new Exception("simulated failure");
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** One thread's loop on its own connection: claim one, handle, settle. */
    static void work() throws Exception {
        try (Connection conn = connect();
             PreparedStatement claim = conn.prepareStatement(
                 "SELECT id, attempt, payload::text FROM queue_claim(?, 1)");
             PreparedStatement settle = conn.prepareStatement(
                 "SELECT queue_complete(?, ?, ?, ?::interval)")) {
            claim.setString(1, QUEUE);
            while (!stopping) {
                String id, payload;
                int attempt;
                try (ResultSet rs = claim.executeQuery()) {
                    if (!rs.next()) {
                        Thread.sleep(IDLE_MS);
                        continue;
                    }
                    id = rs.getString(1);
                    attempt = rs.getInt(2);
                    payload = rs.getString(3);
                }
                say("claimed " + id + " attempt " + attempt);
                String outcome = "ack", delay = null;
                double seconds = 0;
                try {
                    handle(payload, attempt);
                } catch (Exception e) {
                    outcome = "retry_after";
                    seconds = Math.min(BACKOFF_SECONDS * Math.pow(2, attempt - 1), 3600);
                    delay = seconds + " seconds";
                    say("failed " + id + ": " + e.getMessage());
                }
                settle.setString(1, QUEUE);
                settle.setString(2, id);
                settle.setString(3, outcome);
                settle.setString(4, delay);
                try (ResultSet rs = settle.executeQuery()) {
                    rs.next();
                    String result = rs.getString(1);
                    if (result.equals("delayed")) say("retry " + id + " in " + seconds + "s");
                    else if (result.equals("dead_lettered")) say("dead " + id);
                    else say("acked " + id);
                } catch (SQLException e) {
                    // the session lost the key (a reconnect): the row is ready
                    // again and runs elsewhere, so handlers must tolerate that
                    if (!NOT_HELD.equals(e.getSQLState())) throw e;
                    say("not held " + id);
                }
            }
        }
    }

    public static void main(String[] args) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        CountDownLatch done = new CountDownLatch(THREADS);
        List<Throwable> errors = new ArrayList<>();
        for (int i = 0; i < THREADS; i++) {
            pool.submit(() -> {
                try {
                    work();
                } catch (Throwable e) {
                    synchronized (errors) { errors.add(e); }
                    stopping = true;
                } finally {
                    done.countDown();
                }
            });
        }
        // SIGTERM runs this hook, and the JVM exits once it returns: it waits
        // for the threads to settle what they hold and for the last word
        CountDownLatch finished = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping = true;
            try { finished.await(); } catch (InterruptedException ignored) { }
        }));
        done.await();
        pool.shutdown();
        for (Throwable e : errors) e.printStackTrace();
        say(errors.isEmpty() ? "stopped" : "failed");
        finished.countDown();
        if (!errors.isEmpty()) System.exit(1);
    }
}
