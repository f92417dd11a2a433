// GoldenEvents writes the golden files of golden_test.go. It follows the
// structure of Beam's generator (Generator, GeneratorConfig and the
// Person/Auction/Bid/Strings/Price/LongGenerator classes) on a real JVM, so
// that java.util.Random, Math.pow, Math.round, String.format and
// String.trim are the JDK's own, plus the documented deterministic
// replacements of the Flink port's channel URLs and weir's seed mixing.
//
// Regenerate (JDK 11 or later) from the package directory:
//
//	java testdata/GoldenEvents.java default > testdata/golden_default.txt
//	java testdata/GoldenEvents.java custom > testdata/golden_custom.txt
//
// Output: one line per event, tab-separated, as goldenLine formats it.
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

public class GoldenEvents {
  static final String[] STATES = "AZ,CA,ID,OR,WA,WY".split(",");
  static final String[] CITIES =
      "Phoenix,Los Angeles,San Francisco,Boise,Portland,Bend,Redmond,Seattle,Kent,Cheyenne".split(",");
  static final String[] FIRST = "Peter,Paul,Luke,John,Saul,Vicky,Kate,Julie,Sarah,Deiter,Walter".split(",");
  static final String[] LAST = "Shultz,Abrams,Spencer,White,Bartels,Walton,Smith,Jones,Noris".split(",");
  static final String[] HOT_CHANNELS = {"Google", "Facebook", "Baidu", "Apple"};

  // Configuration.
  static long seed, baseTime;
  static double eventsPerSecond;
  static int avgPerson, avgAuction, avgBid, hotAuctionRatio, hotSellersRatio, hotBiddersRatio;
  static int numActivePeople, numInFlightAuctions;

  public static void main(String[] args) {
    List<Long> events = new ArrayList<>();
    if (args[0].equals("default")) {
      seed = 0; baseTime = 0; eventsPerSecond = 10_000;
      avgPerson = 200; avgAuction = 500; avgBid = 100;
      hotAuctionRatio = 2; hotSellersRatio = 4; hotBiddersRatio = 4;
      numActivePeople = 1000; numInFlightAuctions = 100;
      for (long n = 0; n < 1500; n++) events.add(n);
    } else {
      // Small rates exercise LongGenerator's nextLong fallback, a rate
      // that does not divide 1e6 the fractional delay, and large event
      // numbers the id arithmetic.
      seed = 12345; baseTime = 1_700_000_000_000L; eventsPerSecond = 0.0003;
      avgPerson = 300; avgAuction = 700; avgBid = 40;
      hotAuctionRatio = 3; hotSellersRatio = 5; hotBiddersRatio = 7;
      numActivePeople = 50; numInFlightAuctions = 20;
      for (long n = 0; n < 300; n++) events.add(n);
      for (long n = 1_000_000_000L; n < 1_000_000_100L; n++) events.add(n);
      for (long n = 2_000_000_000L; n < 2_000_000_050L; n++) events.add(n);
    }
    StringBuilder out = new StringBuilder();
    for (long n : events) out.append(event(n)).append('\n');
    System.out.print(out);
  }

  static long salt() {
    if (seed == 0) return 0;
    long z = seed;
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }

  static long timestamp(long n) {
    double delay = 1e6 / eventsPerSecond;
    if (delay == Math.floor(delay) && delay < 9007199254740992.0) {
      return baseTime + n * (long) delay / 1000L;
    }
    return baseTime + (long) (n * delay) / 1000L;
  }

  static String event(long n) {
    Random r = new Random(n ^ salt());
    long ts = timestamp(n);
    long rem = n % 50;
    if (rem < 1) return person(n, r, ts);
    if (rem < 4) return auction(n, r, ts);
    return bid(n, r, ts);
  }

  static long lastPerson(long n) {
    long epoch = n / 50, offset = n % 50;
    if (offset >= 1) offset = 0;
    return epoch + offset;
  }

  static long lastAuction(long n) {
    long epoch = n / 50, offset = n % 50;
    if (offset < 1) { epoch--; offset = 2; }
    else if (offset >= 4) offset = 2;
    else offset -= 1;
    return epoch * 3 + offset;
  }

  static long nextLong(Random r, long n) {
    if (n < Integer.MAX_VALUE) return r.nextInt((int) n);
    return Math.abs(r.nextLong() % n);
  }

  static long nextPerson(long n, Random r) {
    long numPeople = lastPerson(n) + 1;
    long active = Math.min(numPeople, numActivePeople);
    return numPeople - active + nextLong(r, active + 10);
  }

  static long nextAuctionId(long n, Random r) {
    long min = Math.max(lastAuction(n) - numInFlightAuctions, 0);
    long max = lastAuction(n);
    return min + nextLong(r, max - min + 1 + 10);
  }

  static long price(Random r) {
    return Math.round(Math.pow(10.0, r.nextDouble() * 6.0) * 100.0);
  }

  static String string(Random r, int maxLength, char special) {
    int len = 3 + r.nextInt(maxLength - 3);
    StringBuilder sb = new StringBuilder();
    while (len-- > 0) {
      if (r.nextInt(13) == 0) sb.append(special);
      else sb.append((char) ('a' + r.nextInt(26)));
    }
    return sb.toString().trim();
  }

  static String exact(Random r, int length) {
    StringBuilder sb = new StringBuilder();
    int rnd = 0, left = 0;
    while (length-- > 0) {
      if (left == 0) { rnd = r.nextInt(); left = 6; }
      sb.append((char) ('a' + rnd % 26));
      rnd /= 26;
      left--;
    }
    return sb.toString();
  }

  static String extra(Random r, int current, int avg) {
    if (current > avg) return "";
    avg -= current;
    int delta = (int) Math.round(avg * 0.2);
    int size = avg - delta + (delta == 0 ? 0 : r.nextInt(2 * delta));
    return exact(r, size);
  }

  static String person(long n, Random r, long ts) {
    long id = lastPerson(n) + 1000;
    String name = FIRST[r.nextInt(FIRST.length)] + " " + LAST[r.nextInt(LAST.length)];
    String email = string(r, 7, ' ') + "@" + string(r, 5, ' ') + ".com";
    StringBuilder cc = new StringBuilder();
    for (int i = 0; i < 4; i++) {
      if (i > 0) cc.append(' ');
      cc.append(String.format("%04d", r.nextInt(10000)));
    }
    String city = CITIES[r.nextInt(CITIES.length)];
    String state = STATES[r.nextInt(STATES.length)];
    int size = 8 + name.length() + email.length() + cc.length() + city.length() + state.length();
    String x = extra(r, size, avgPerson);
    return String.join("\t", "P", "" + id, name, email, cc.toString(), city, state, "" + ts, x);
  }

  static String auction(long n, Random r, long ts) {
    long id = lastAuction(n) + 1000;
    long seller;
    if (r.nextInt(hotSellersRatio) > 0) seller = (lastPerson(n) / 100) * 100;
    else seller = nextPerson(n, r);
    seller += 1000;
    long category = 10 + r.nextInt(5);
    long initialBid = price(r);
    long eventsForAuctions = ((long) numInFlightAuctions * 50) / 3;
    long horizon = timestamp(n + eventsForAuctions) - ts;
    long expires = ts + 1 + nextLong(r, Math.max(horizon * 2, 1L));
    String name = string(r, 20, ' ');
    String desc = string(r, 100, ' ');
    long reserve = initialBid + price(r);
    int size = 8 + name.length() + desc.length() + 8 + 8 + 8 + 8 + 8;
    String x = extra(r, size, avgAuction);
    return String.join("\t", "A", "" + id, name, desc, "" + initialBid, "" + reserve, "" + ts,
        "" + expires, "" + seller, "" + category, x);
  }

  static String baseUrl(Random r) {
    return "https://www.nexmark.com/" + string(r, 5, '_') + '/' + string(r, 5, '_') + '/'
        + string(r, 5, '_') + '/' + "item.htm?query=1";
  }

  static String bid(long n, Random r, long ts) {
    long auction;
    if (r.nextInt(hotAuctionRatio) > 0) auction = (lastAuction(n) / 100) * 100;
    else auction = nextAuctionId(n, r);
    auction += 1000;
    long bidder;
    if (r.nextInt(hotBiddersRatio) > 0) bidder = (lastPerson(n) / 100) * 100 + 1;
    else bidder = nextPerson(n, r);
    bidder += 1000;
    long price = price(r);
    String channel, url;
    if (r.nextInt(2) > 0) {
      int i = r.nextInt(HOT_CHANNELS.length);
      channel = HOT_CHANNELS[i];
      url = baseUrl(new Random(-1 - i));
    } else {
      int c = r.nextInt(10_000);
      channel = "channel-" + c;
      Random cr = new Random(c);
      url = baseUrl(cr);
      if (cr.nextInt(10) > 0) url = url + "&channel_id=" + Math.abs(Integer.reverse(c));
    }
    String x = extra(r, 8 + 8 + 8 + 8, avgBid);
    return String.join("\t", "B", "" + auction, "" + bidder, "" + price, channel, url, "" + ts, x);
  }
}
