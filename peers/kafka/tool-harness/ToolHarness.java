// Many runs of Kafka's command-line tools in one JVM (a JVM start costs ~2 s here).
//
// Reads one JSON array a line on stdin: the tool's main class, then its arguments. Runs
// its `main` with stdout and stderr captured and Kafka's exit procedure replaced, and
// writes one JSON object a line on stdout: {"exit": code, "out": "...", "err": "..."}.
//
// A tool "exits" by calling Exit.exit; here that throws, so nothing past it runs (no
// request sent after a usage error), and the output is cut where the exit happened: the
// tools' catch-all handlers would otherwise print the throw. A tool that returns without
// calling Exit.exit exited 0, as its JVM would.
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.utils.internals.Exit;

public final class ToolHarness {
    /** Thrown by the replaced exit procedure; an Error so few handlers mean to catch it. */
    private static final class ToolExited extends Error {
        ToolExited() {
            super("exit", null, false, false);
        }
    }

    private static final class Capture {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final ByteArrayOutputStream err = new ByteArrayOutputStream();
        final PrintStream outStream = new PrintStream(out, true, StandardCharsets.UTF_8);
        final PrintStream errStream = new PrintStream(err, true, StandardCharsets.UTF_8);
        Integer exit;
        int outCut = -1;
        int errCut = -1;

        synchronized void exited(int code) {
            if (exit == null) {
                outStream.flush();
                errStream.flush();
                exit = code;
                outCut = out.size();
                errCut = err.size();
            }
            throw new ToolExited();
        }

        String text(ByteArrayOutputStream stream, int cut) {
            byte[] bytes = stream.toByteArray();
            int end = cut < 0 ? bytes.length : Math.min(cut, bytes.length);
            return new String(bytes, 0, end, StandardCharsets.UTF_8);
        }
    }

    public static void main(String[] ignored) throws Exception {
        ObjectMapper json = new ObjectMapper();
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            List<?> argv = json.readValue(line, List.class);
            String[] args = new String[argv.size() - 1];
            for (int i = 1; i < argv.size(); i++) {
                args[i - 1] = String.valueOf(argv.get(i));
            }
            Capture capture = new Capture();
            Exit.setExitProcedure((code, message) -> capture.exited(code));
            Exit.setHaltProcedure((code, message) -> capture.exited(code));
            System.setOut(capture.outStream);
            System.setErr(capture.errStream);
            try {
                Method main = Class.forName(String.valueOf(argv.get(0))).getMethod("main", String[].class);
                main.invoke(null, (Object) args);
            } catch (java.lang.reflect.InvocationTargetException e) {
                if (!(e.getCause() instanceof ToolExited) && capture.exit == null) {
                    e.getCause().printStackTrace(capture.errStream);
                    capture.exit = 1;
                }
            } finally {
                System.setOut(realOut);
                System.setErr(realErr);
                Exit.resetExitProcedure();
                Exit.resetHaltProcedure();
            }
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("exit", capture.exit == null ? 0 : capture.exit);
            result.put("out", capture.text(capture.out, capture.outCut));
            result.put("err", capture.text(capture.err, capture.errCut));
            realOut.println(json.writeValueAsString(result));
            realOut.flush();
        }
    }
}
