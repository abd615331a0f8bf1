// Apache Iceberg's REST catalog on 127.0.0.1 for the tests (tests/support/iceberg_rest.py): Iceberg's own
// RESTCatalogAdapter and RESTCatalogServlet (iceberg-core's tests jar, what apache/iceberg-rest-fixture serves) over a
// JdbcCatalog on SQLite, in Jetty. Run in java's source-file mode with the iceberg-rest-catalog profile's class path:
//   java -cp <classpath> RestCatalog.java <port> <sqlite file> <warehouse directory>
import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;

public class RestCatalog {
  public static void main(String[] args) throws Exception {
    Map<String, String> props = new HashMap<>();
    props.put("catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog");
    props.put("uri", "jdbc:sqlite:" + args[1]);
    props.put("jdbc.schema-version", "V1");
    props.put("warehouse", args[2]);
    Catalog catalog = CatalogUtil.buildIcebergCatalog("rest_backend", props, new Configuration());
    ServletContextHandler context = new ServletContextHandler();
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))), "/*");
    Server server = new Server(new InetSocketAddress("127.0.0.1", Integer.parseInt(args[0])));
    server.setHandler(context);
    server.start();
    System.out.println("READY http://127.0.0.1:" + args[0]);
    System.out.flush();
    server.join();
  }
}
