import java.io.File;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * The tests' HDFS: Hadoop's MiniDFSCluster (one NameNode, one DataNode) on 127.0.0.1, run in java's source-file mode
 * by tests/support/hdfs.py on the classpath of pom.xml's hdfs-minicluster profile.
 *
 * <p>Arguments: the data directory, the NameNode's RPC port, its HTTP (WebHDFS) port. Prints "READY" once the
 * DataNode has registered; a SIGTERM stops the cluster (its shutdown hook). The data directory is kept, so a restart
 * on the same directory and ports serves the same files.
 */
public class MiniHdfs {
  public static void main(String[] args) throws Exception {
    File base = new File(args[0]);
    int rpcPort = Integer.parseInt(args[1]);
    int httpPort = Integer.parseInt(args[2]);
    boolean format = !new File(base, "data").exists();
    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getAbsolutePath());
    conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
    conf.set("dfs.namenode.http-bind-host", "127.0.0.1");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    conf.setBoolean("dfs.webhdfs.enabled", true);
    conf.setBoolean("dfs.permissions.enabled", false);
    conf.setInt("dfs.replication", 1);
    // a short-lived test cluster: no safe mode waiting for block reports after a restart
    conf.setFloat("dfs.namenode.safemode.threshold-pct", 0f);
    conf.setInt("dfs.namenode.safemode.extension", 0);
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
        .nameNodePort(rpcPort)
        .nameNodeHttpPort(httpPort)
        .numDataNodes(1)
        .format(format)
        .manageNameDfsDirs(true)
        .manageDataDfsDirs(true)
        .build();
    cluster.waitActive();
    Runtime.getRuntime().addShutdownHook(new Thread(cluster::shutdown));
    System.out.println("READY " + cluster.getURI());
    System.out.flush();
    Thread.currentThread().join();
  }
}
