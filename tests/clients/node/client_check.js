// node-postgres (`pg`) through dpgate, run by tests/clients/test_node.py:
//   DPGATE_URL=postgresql://… PRODUCT_ID=k node client_check.js
// Prints one JSON object with what each check saw; the test asserts on it.
const { Client, Pool } = require('pg');

async function main() {
  const result = {};
  const client = new Client({ connectionString: process.env.DPGATE_URL });
  await client.connect();
  try {
    const tables = await client.query(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'");
    result.tables = tables.rows.map((row) => row.table_name);
    const columns = await client.query(
      'SELECT column_name, data_type FROM information_schema.columns ' +
      'WHERE table_name = $1 ORDER BY ordinal_position', ['orders']);
    result.columns = columns.rows.map((row) => row.column_name);
    const product = Number(process.env.PRODUCT_ID);
    const count = await client.query(
      'SELECT count(*) FROM orders WHERE product_id = $1', [product]);
    result.count = count.rows[0].count;
    // A named statement is parsed once and executed again with new parameters.
    const named = { name: 'price-of', text: 'SELECT price FROM products WHERE product_id = $1' };
    result.prices = [];
    for (const id of [1, 2, 1]) {
      const price = await client.query({ ...named, values: [id] });
      result.prices.push(price.rows[0].price);
    }
    try {
      await client.query('SELECT * FROM orders');
      result.refused = null;
    } catch (error) {
      result.refused = error.code;
    }
    try {
      await client.query('SELECT * FROM orders WHERE product_id = $1', [product]);
      result.refused_extended = null;
    } catch (error) {
      result.refused_extended = error.code;
    }
    result.after_refusal = (await client.query('SELECT $1::int + 1 AS n', [41])).rows[0].n;
  } finally {
    await client.end();
  }
  const pool = new Pool({ connectionString: process.env.DPGATE_URL, max: 2 });
  const answers = await Promise.all([1, 2, 3].map((id) =>
    pool.query('SELECT name FROM products WHERE product_id = $1', [id])));
  result.pool = answers.map((answer) => answer.rows.length);
  await pool.end();
  console.log(JSON.stringify(result));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
