// Replays BI tools' catalog SQL through pgjdbc, as DBeaver and Metabase send it (prepared
// statements, extended protocol). Run by tests/clients/test_bi_tools.py:
//   java -cp /usr/share/java/postgresql.jar CatalogReplay.java URL USER PASSWORD < statements
// stdin holds the statements separated by NUL characters. For each statement it prints one
// line: `OK<TAB>rows<TAB>cell<TAB>cell…` (every cell of every row) or
// `ERR<TAB>sqlstate<TAB>message`.
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Properties;

public class CatalogReplay {
    public static void main(String[] args) throws Exception {
        Properties properties = new Properties();
        properties.setProperty("user", args[1]);
        properties.setProperty("password", args[2]);
        String input = new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
        try (Connection connection = DriverManager.getConnection(args[0], properties)) {
            for (String sql : input.split("\u0000")) {
                System.out.println(run(connection, sql));
            }
        }
    }

    static String run(Connection connection, String sql) {
        try (PreparedStatement statement = connection.prepareStatement(sql)) {
            if (!statement.execute()) {
                return "OK\t0";
            }
            StringBuilder line = new StringBuilder();
            int rows = 0;
            try (ResultSet result = statement.getResultSet()) {
                int columns = result.getMetaData().getColumnCount();
                while (result.next()) {
                    rows++;
                    for (int column = 1; column <= columns; column++) {
                        String value = result.getString(column);
                        line.append('\t').append(value == null ? "" : value.replaceAll("\\s", " "));
                    }
                }
            }
            return "OK\t" + rows + line;
        } catch (SQLException error) {
            return "ERR\t" + error.getSQLState() + "\t" + error.getMessage().replaceAll("\\s", " ");
        }
    }
}
