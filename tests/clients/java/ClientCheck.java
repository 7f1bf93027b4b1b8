// pgjdbc through dpgate, run by tests/clients/test_jdbc.py in single-file source mode:
//   java -cp /usr/share/java/postgresql.jar ClientCheck.java URL USER PASSWORD PRODUCT_ID
// Prints one `key=value` line per check; the test asserts on them.
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

public class ClientCheck {
    public static void main(String[] args) throws Exception {
        Properties properties = new Properties();
        properties.setProperty("user", args[1]);
        properties.setProperty("password", args[2]);
        int product = Integer.parseInt(args[3]);
        try (Connection connection = DriverManager.getConnection(args[0], properties)) {
            DatabaseMetaData metadata = connection.getMetaData();
            print("product", metadata.getDatabaseProductName() + " "
                  + metadata.getDatabaseProductVersion());
            print("tables", column(metadata.getTables(null, "public", "%",
                                                      new String[] {"TABLE"}), "TABLE_NAME"));
            print("columns", column(metadata.getColumns(null, "public", "orders", "%"),
                                    "COLUMN_NAME"));
            print("primary_key", column(metadata.getPrimaryKeys(null, "public", "orders"),
                                        "COLUMN_NAME"));

            // Past prepareThreshold (5) pgjdbc switches to a named server-side statement.
            List<String> counts = new ArrayList<>();
            try (PreparedStatement count = connection.prepareStatement(
                    "SELECT count(*) FROM orders WHERE product_id = ?")) {
                for (int run = 0; run < 7; run++) {
                    count.setInt(1, product);
                    try (ResultSet rows = count.executeQuery()) {
                        rows.next();
                        counts.add(Long.toString(rows.getLong(1)));
                    }
                }
            }
            print("counts", String.join(",", counts));

            try (Statement statement = connection.createStatement()) {
                statement.executeQuery("SELECT * FROM orders");
                print("refused", "no");
            } catch (SQLException refused) {
                print("refused", refused.getSQLState());
            }
            try (Statement statement = connection.createStatement();
                 ResultSet rows = statement.executeQuery("SELECT 41 + 1")) {
                rows.next();
                print("after_refusal", rows.getString(1));
            }

            // A fetch size inside a transaction makes pgjdbc fetch through a portal in pages.
            connection.setAutoCommit(false);
            try (PreparedStatement products = connection.prepareStatement(
                    "SELECT product_id FROM products ORDER BY product_id")) {
                products.setFetchSize(100);
                long rows = 0;
                long sum = 0;
                try (ResultSet result = products.executeQuery()) {
                    while (result.next()) {
                        rows++;
                        sum += result.getLong(1);
                    }
                }
                print("fetched", rows + "," + sum);
            }
            connection.commit();
        }
    }

    static String column(ResultSet rows, String name) throws SQLException {
        List<String> values = new ArrayList<>();
        try (rows) {
            while (rows.next()) {
                values.add(rows.getString(name));
            }
        }
        return String.join(",", values);
    }

    static void print(String key, String value) {
        System.out.println(key + "=" + value);
    }
}
