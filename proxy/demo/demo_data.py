"""Deterministic demo dataset (customers, products, orders, recommendations) for dpgate.

Every row is generated from one seeded ``random.Random`` so that every load, on any
machine, produces the same data, and is written with COPY inside a single transaction
so that a half-loaded dataset is never visible.
"""

from __future__ import annotations

import datetime
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import psycopg

DEMO_TABLES: tuple[str, ...] = ("customers", "products", "orders", "recommendations")

SEED = 20240101
NUM_CUSTOMERS = 10_000
NUM_PRODUCTS = 1_000
NUM_ORDERS = 100_000
MAX_ORDERS_PER_CUSTOMER = 50
# Product 1 is what the demo's first query counts; this popularity rank gives it ~270 orders.
PRODUCT_1_POPULARITY_RANK = 50
FIRST_ORDER_DATE = datetime.date(2024, 1, 1)
LAST_ORDER_DATE = datetime.date(2025, 12, 31)
# Arbitrary constant key so that concurrent loaders serialise instead of racing.
_ADVISORY_LOCK_KEY = 0x6470_6761_7465  # "dpgate"

# Word lists kept compact rather than one entry per line.
# fmt: off
_FIRST_NAMES = (
    "James", "Mary", "Robert", "Patricia", "John", "Jennifer", "Michael", "Linda", "David",
    "Elizabeth", "William", "Barbara", "Richard", "Susan", "Joseph", "Jessica", "Thomas",
    "Sarah", "Carlos", "Maria", "Ahmed", "Fatima", "Wei", "Mei", "Hiroshi", "Yuki", "Lars",
    "Ingrid", "Pierre", "Camille", "Luca", "Giulia", "Raj", "Priya", "Olusegun", "Amara",
)
_LAST_NAMES = (
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez",
    "Martinez", "Hernandez", "Lopez", "Wilson", "Anderson", "Taylor", "Moore", "Martin", "Lee",
    "Chen", "Wang", "Kim", "Tanaka", "Sato", "Nielsen", "Johansson", "Dubois", "Rossi",
    "Bianchi", "Patel", "Sharma", "Okafor", "Mensah", "Schmidt", "Novak",
)
_STREET_NAMES = (
    "Oak", "Maple", "Pine", "Cedar", "Elm", "Main", "High", "Church", "Park", "Lake", "Hill",
    "Station", "Mill", "River", "Market", "King", "Queen", "Victoria", "Garden", "Bridge",
)
_STREET_SUFFIXES = ("Street", "Road", "Avenue", "Lane", "Way", "Drive", "Boulevard")
_US_CITIES = (
    "Springfield", "Portland", "Austin", "Denver", "Columbus", "Madison", "Richmond",
    "Sacramento", "Boston", "Seattle", "Chicago", "Phoenix",
)
_ADJECTIVES = (
    "Classic", "Deluxe", "Compact", "Eco", "Premium", "Smart", "Vintage", "Ultra", "Basic",
    "Pro", "Everyday", "Travel",
)
# fmt: on

US_COUNTRY = "United States"
# Other countries with a few of their cities; drawn uniformly for non-US customers.
_FOREIGN_CITIES: dict[str, tuple[str, ...]] = {
    "Canada": ("Toronto", "Vancouver", "Montreal", "Ottawa"),
    "Mexico": ("Mexico City", "Guadalajara", "Monterrey"),
    "United Kingdom": ("London", "Manchester", "Leeds", "Bristol"),
    "Germany": ("Berlin", "Munich", "Hamburg", "Cologne"),
    "France": ("Paris", "Lyon", "Marseille", "Toulouse"),
    "Italy": ("Rome", "Milan", "Naples", "Turin"),
    "Spain": ("Madrid", "Barcelona", "Valencia", "Seville"),
    "Japan": ("Tokyo", "Osaka", "Kyoto", "Sapporo"),
    "India": ("Mumbai", "Delhi", "Bengaluru", "Chennai"),
    "Brazil": ("Sao Paulo", "Rio de Janeiro", "Brasilia", "Salvador"),
}
COUNTRIES: tuple[str, ...] = (US_COUNTRY, *_FOREIGN_CITIES)
US_SHARE = 1 / 3

# Category -> (product nouns, price range in cents).
_CATEGORIES: dict[str, tuple[tuple[str, ...], tuple[int, int]]] = {
    "Electronics": (("Headphones", "Speaker", "Charger", "Monitor", "Keyboard"), (1_999, 49_999)),
    "Books": (("Novel", "Cookbook", "Atlas", "Biography", "Guide"), (499, 4_999)),
    "Home": (("Lamp", "Rug", "Vase", "Clock", "Cushion"), (999, 19_999)),
    "Kitchen": (("Kettle", "Skillet", "Knife Set", "Blender", "Mug"), (599, 24_999)),
    "Toys": (("Puzzle", "Robot", "Board Game", "Kite", "Building Set"), (499, 9_999)),
    "Sports": (("Yoga Mat", "Football", "Water Bottle", "Racket", "Dumbbell"), (799, 29_999)),
    "Clothing": (("T-Shirt", "Jacket", "Scarf", "Sneakers", "Hat"), (999, 14_999)),
    "Garden": (("Hose", "Planter", "Shovel", "Seed Kit", "Bird Feeder"), (399, 12_999)),
}

_SCHEMA_DDL = """
CREATE TABLE public.customers (
    customer_id integer NOT NULL,
    name text NOT NULL,
    address text NOT NULL
);
CREATE TABLE public.products (
    product_id integer NOT NULL,
    name text NOT NULL,
    category text NOT NULL,
    price numeric(10, 2) NOT NULL
);
CREATE TABLE public.orders (
    order_id integer NOT NULL,
    customer_id integer NOT NULL,
    product_id integer NOT NULL,
    quantity integer NOT NULL,
    order_cost numeric(12, 2) NOT NULL,
    order_date date NOT NULL
);
CREATE TABLE public.recommendations (
    customer_id integer NOT NULL,
    product_id integer NOT NULL
);
"""

# Constraints and indexes are added after COPY: one bulk build/validation is much
# faster than maintaining them row by row.
_CONSTRAINTS_DDL = """
ALTER TABLE public.customers ADD PRIMARY KEY (customer_id);
ALTER TABLE public.products ADD PRIMARY KEY (product_id);
ALTER TABLE public.orders ADD PRIMARY KEY (order_id),
    ADD FOREIGN KEY (customer_id) REFERENCES public.customers,
    ADD FOREIGN KEY (product_id) REFERENCES public.products;
ALTER TABLE public.recommendations ADD PRIMARY KEY (customer_id, product_id),
    ADD FOREIGN KEY (customer_id) REFERENCES public.customers,
    ADD FOREIGN KEY (product_id) REFERENCES public.products;
CREATE INDEX orders_customer_id_idx ON public.orders (customer_id);
CREATE INDEX orders_product_id_idx ON public.orders (product_id);
"""


@dataclass(frozen=True)
class DemoDataset:
    """The generated rows of every demo table, in the column order of its DDL."""

    customers: list[tuple[int, str, str]]
    products: list[tuple[int, str, str, Decimal]]
    orders: list[tuple[int, int, int, int, Decimal, datetime.date]]
    recommendations: list[tuple[int, int]]


def _make_customers(rng: random.Random) -> list[tuple[int, str, str]]:
    customers = []
    for customer_id in range(1, NUM_CUSTOMERS + 1):
        name = f"{rng.choice(_FIRST_NAMES)} {rng.choice(_LAST_NAMES)}"
        number, street_name = rng.randrange(1, 1000), rng.choice(_STREET_NAMES)
        street = f"{number} {street_name} {rng.choice(_STREET_SUFFIXES)}"
        if rng.random() < US_SHARE:
            country, city = US_COUNTRY, rng.choice(_US_CITIES)
        else:
            country = rng.choice(COUNTRIES[1:])
            city = rng.choice(_FOREIGN_CITIES[country])
        customers.append((customer_id, name, f"{street}, {city}, {country}"))
    return customers


def _make_products(rng: random.Random) -> list[tuple[int, str, str, Decimal]]:
    products = []
    categories = list(_CATEGORIES)
    for product_id in range(1, NUM_PRODUCTS + 1):
        category = rng.choice(categories)
        nouns, (low_cents, high_cents) = _CATEGORIES[category]
        model = f"{rng.choice('ABCDEFGHJK')}{product_id}"
        name = f"{rng.choice(_ADJECTIVES)} {rng.choice(nouns)} {model}"
        price = Decimal(rng.randrange(low_cents, high_cents + 1)).scaleb(-2)
        products.append((product_id, name, category, price))
    return products


def _product_cum_weights(rng: random.Random) -> list[float]:
    """Cumulative Zipf(1) popularity weights for product ids 1..NUM_PRODUCTS."""
    ranks = list(range(1, NUM_PRODUCTS + 1))
    rng.shuffle(ranks)
    # Swap so product 1 (index 0) gets the chosen rank, keeping ranks a permutation.
    other = ranks.index(PRODUCT_1_POPULARITY_RANK)
    ranks[0], ranks[other] = ranks[other], ranks[0]
    return list(itertools.accumulate(1.0 / rank for rank in ranks))


def _orders_per_customer(rng: random.Random) -> list[int]:
    """Skewed per-customer order counts summing to NUM_ORDERS, capped at the maximum.

    A gamma distribution (shape 1.5, mean 10) gives a long tail clipped at the cap and a
    few hundred customers below one order, i.e. with none.
    """
    counts = [
        min(MAX_ORDERS_PER_CUSTOMER, int(rng.gammavariate(1.5, 10 / 1.5)))
        for _ in range(NUM_CUSTOMERS)
    ]
    # Nudge random mid-range customers until the total is exact; only touching counts in
    # 1..cap-1 keeps both the zero-order customers and the capped ones as they are.
    excess = sum(counts) - NUM_ORDERS
    step = -1 if excess > 0 else 1
    lowest = 2 if step < 0 else 1
    while excess:
        i = rng.randrange(NUM_CUSTOMERS)
        if lowest <= counts[i] < MAX_ORDERS_PER_CUSTOMER:
            counts[i] += step
            excess += step
    return counts


def _make_orders(
    rng: random.Random, products: list[tuple[int, str, str, Decimal]]
) -> list[tuple[int, int, int, int, Decimal, datetime.date]]:
    counts = _orders_per_customer(rng)
    customer_ids = [
        cid for cid, n in zip(range(1, NUM_CUSTOMERS + 1), counts, strict=True) for _ in range(n)
    ]
    product_ids = rng.choices(
        range(1, NUM_PRODUCTS + 1), cum_weights=_product_cum_weights(rng), k=NUM_ORDERS
    )
    prices = {product_id: price for product_id, _, _, price in products}
    num_days = (LAST_ORDER_DATE - FIRST_ORDER_DATE).days + 1
    draft = []
    for customer_id, product_id in zip(customer_ids, product_ids, strict=True):
        # Small quantities are the common case.
        quantity = rng.choices(range(1, 11), weights=(30, 22, 15, 10, 7, 5, 4, 3, 2, 2))[0]
        order_date = FIRST_ORDER_DATE + datetime.timedelta(days=rng.randrange(num_days))
        draft.append((order_date, customer_id, product_id, quantity))
    # Number orders chronologically, as a real order table would be.
    draft.sort()
    return [
        (order_id, customer_id, product_id, quantity, prices[product_id] * quantity, order_date)
        for order_id, (order_date, customer_id, product_id, quantity) in enumerate(draft, 1)
    ]


def _make_recommendations(rng: random.Random) -> list[tuple[int, int]]:
    """About three distinct, popularity-weighted product recommendations per customer."""
    cum_weights = _product_cum_weights(rng)
    product_ids = range(1, NUM_PRODUCTS + 1)
    pairs: list[tuple[int, int]] = []
    for customer_id in range(1, NUM_CUSTOMERS + 1):
        picks = rng.choices(product_ids, cum_weights=cum_weights, k=rng.randrange(7))
        pairs.extend((customer_id, product_id) for product_id in sorted(set(picks)))
    return pairs


def generate_demo_dataset() -> DemoDataset:
    """Generate the demo rows; the result is identical on every call."""
    rng = random.Random(SEED)
    customers = _make_customers(rng)
    products = _make_products(rng)
    orders = _make_orders(rng, products)
    return DemoDataset(customers, products, orders, _make_recommendations(rng))


def demo_tables_exist(cur: psycopg.Cursor) -> bool:
    cur.execute(
        "SELECT bool_and(to_regclass('public.' || t) IS NOT NULL) FROM unnest(%s::text[]) AS t",
        (list(DEMO_TABLES),),
    )
    row = cur.fetchone()
    return bool(row and row[0])


def load_demo_dataset(conninfo: str) -> bool:
    """Create and fill the demo tables in the database at conninfo if they are not there yet.

    conninfo is a libpq conninfo string or URI. Returns True if this call loaded the
    tables, False if they already existed. The load is a single transaction; if only some
    of the tables exist (someone else's tables with the same names), the CREATE fails and
    nothing is changed.
    """
    with psycopg.connect(conninfo, autocommit=True) as conn:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY_LOCK_KEY,))
            if demo_tables_exist(cur):
                return False
            data = generate_demo_dataset()
            cur.execute(_SCHEMA_DDL)
            tables: tuple[Sequence[Sequence[object]], ...] = (
                data.customers, data.products, data.orders, data.recommendations)
            for table, rows in zip(DEMO_TABLES, tables, strict=True):
                with cur.copy(f"COPY public.{table} FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            cur.execute(_CONSTRAINTS_DDL)
        # Fresh statistics so the planner sees the real table sizes right away.
        conn.execute("ANALYZE " + ", ".join(f"public.{table}" for table in DEMO_TABLES))
    return True
